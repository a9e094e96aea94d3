"""What the diagnosis says of each catalogue id (`playground.failures`): the guide's cause and its fix.

The
explanations paraphrase the metrics guide (section in brackets); the fixes are Hydra overrides with verl's keys
(playground keys where verl has none), rendered against the run's config by `render_fix`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from playground.metrics import fmt

# The guide's cause and remedy in words, per id.
EXPLANATIONS: dict[str, dict[str, str]] = {
    "healthy": {
        "en": "The score rises and every metric the engine checks is in range (guide §11.4 example 1).",
        "zh": "分数上升，引擎检查的各项指标都在合理范围内（指南 §11.4 示例 1）。"},
    "converged": {
        "en": "The policy barely changes (|ppo_kl| ~1e-4, clipfrac ~0.01) and the score is at its target: the run "
              "has converged (§1.3 scenario 3). Stop it, or make the task harder.",
        "zh": "策略几乎不再变化（|ppo_kl| 约 1e-4，clipfrac 约 0.01），分数已达目标：训练已收敛（§1.3 场景 3）。"
              "可以停止，或提高任务难度。"},
    "lr_too_high": {
        "en": "Many samples are clipped and the policy moves too far per step (large pg_clipfrac and |ppo_kl|, "
              "grad_norm at the clip) while the score does not rise: the actor's learning rate is too high "
              "(§1.2, §1.3 scenario 2, §11.4 example 2). Lower it.",
        "zh": "大量样本被裁剪、每步策略变化过大（pg_clipfrac 和 |ppo_kl| 过大，grad_norm 触发裁剪），分数却不上升："
              "Actor 学习率过高（§1.2、§1.3 场景 2、§11.4 示例 2）。降低学习率。"},
    "lr_too_low": {
        "en": "Almost nothing is clipped and the policy barely changes (|ppo_kl| tiny) while the score stays far "
              "below its target: the policy learns too slowly (§1.2, §1.3). Raise the actor's learning rate (or "
              "clip_ratio).",
        "zh": "几乎没有裁剪、策略几乎不变（|ppo_kl| 极小），分数却远低于目标：策略学得太慢（§1.2、§1.3）。"
              "增大 Actor 学习率（或 clip_ratio）。"},
    "critic_undertrained": {
        "en": "The critic explains little of the returns' variance (vf_explained_var < 0.3, or < 0), its "
              "predictions are far from the returns and vf_loss stays high: the critic is not learning, so the "
              "advantages are unreliable (§2.1, §2.4, §11.2 step 3, §11.4 example 3). Raise the critic's learning "
              "rate or its ppo_epochs.",
        "zh": "Critic 对回报方差的解释很差（vf_explained_var < 0.3 甚至 < 0），预测值远离 returns，vf_loss 居高不下："
              "Critic 没有学到东西，优势估计不可靠（§2.1、§2.4、§11.2 第 3 步、§11.4 示例 3）。"
              "增大 critic 学习率或 ppo_epochs。"},
    "entropy_collapse": {
        "en": "Entropy fell by more than 90% within a few steps while the score stopped rising below its target: "
              "the policy converged prematurely to a local optimum (§1.5 scenario 2, §11.2 problem 2). Raise "
              "entropy_coeff or the rollout temperature.",
        "zh": "熵在几步之内下降超过 90%，分数却停在目标之下不再上升：策略过早收敛、陷入局部最优"
              "（§1.5 场景 2、§11.2 问题 2）。增大 entropy_coeff 或采样温度。"},
    "no_learning_signal": {
        "en": "Every sample gets the same reward (or every advantage is 0) and the score is flat: there is nothing "
              "to learn from (§1.5 scenario 3). Check the reward function, shape the reward, or make the task "
              "reachable for the starting policy (more exploration, an easier curriculum).",
        "zh": "所有样本得到相同的奖励（或优势全为 0），分数不变：没有可学习的信号（§1.5 场景 3）。"
              "检查奖励函数、做奖励塑形，或让初始策略能够触达奖励（更多探索、更简单的课程）。"},
    "overly_deterministic": {
        "en": "The policy is almost deterministic (entropy below 5% of its maximum) while the score is below its "
              "target: it no longer explores (§1.5 table, 'over-fitting'). Raise entropy_coeff.",
        "zh": "策略几乎是确定性的（熵低于最大值的 5%），分数却低于目标：策略不再探索（§1.5 表格“过拟合”）。"
              "增大 entropy_coeff。"},
    "gradient_explosion": {
        "en": "The actor's gradient norm is above 10 and growing: updates are unstable and a crash usually follows "
              "(§1.7, §12). Turn gradient clipping on, lower the learning rate, scale the rewards down.",
        "zh": "Actor 梯度范数超过 10 且持续增大：更新不稳定，通常随后崩溃（§1.7、§12）。"
              "开启梯度裁剪、降低学习率、缩小奖励尺度。"},
    "training_crash": {
        "en": "A loss, gradient norm or value became NaN/Inf (or the run stopped as diverged): the numbers broke "
              "down, usually after a gradient explosion (§1.7). Check the learning rate and the data; clip the "
              "gradients.",
        "zh": "损失、梯度范数或价值出现 NaN/Inf（或训练以 diverged 结束）：数值崩溃，通常发生在梯度爆炸之后（§1.7）。"
              "检查学习率和数据预处理；开启梯度裁剪。"},
    "vanishing_gradient": {
        "en": "The actor's gradient norm stays below 0.01 while the score is below its target: learning has "
              "stalled (§1.7). Check the reward's scale and signal; normalise advantages.",
        "zh": "Actor 梯度范数持续低于 0.01，分数却低于目标：学习停滞（§1.7）。"
              "检查奖励尺度和奖励信号；对优势做归一化。"},
    "grad_clip_saturation": {
        "en": "The actor's gradient norm (before clipping) is at or above grad_clip in most steps: every update is "
              "clipped (§1.7, §11.2 step 1). Lower the learning rate; raise grad_clip only with care.",
        "zh": "大多数步中 Actor 的梯度范数（裁剪前）达到或超过 grad_clip：几乎每次更新都被裁剪（§1.7、§11.2 第 1 步）。"
              "降低学习率；谨慎增大 grad_clip。"},
    "unstable_policy_loss": {
        "en": "pg_loss swings widely from step to step and the score does not rise: training is unstable, from a "
              "learning rate too high or a batch too small (§1.1, §11.2 problem 1). Raise the batch size, lower "
              "the learning rate.",
        "zh": "pg_loss 每步剧烈波动，分数不上升：训练不稳定，原因是学习率过高或批次过小（§1.1、§11.2 问题 1）。"
              "增大批次，降低学习率。"},
    "advantage_not_normalized": {
        "en": "The advantages are far from zero-mean unit scale (|mean| > 0.5 or a spread > 20, with max > 10 or "
              "min < -10): normalisation is off or the reward scale is large (§3.3). Normalise advantages; "
              "scale rewards.",
        "zh": "优势远离零均值、单位尺度（|mean| > 0.5 或 max-min > 20，且 max > 10 或 min < -10）："
              "归一化失效或奖励尺度过大（§3.3）。对优势归一化；缩放奖励。"},
    "reward_variance_too_large": {
        "en": "The rewards' standard deviation is more than 10x their mean: the signal is drowned in noise "
              "(§11.2 problem 1 step 2). Normalise or clip the rewards, remove the noise.",
        "zh": "奖励标准差超过均值的 10 倍：信号被噪声淹没（§11.2 问题 1 第 2 步）。对奖励归一化或裁剪，去除噪声。"},
    "value_drift": {
        "en": "vf_loss fell and then rose again while the actor improved: the return distribution shifts as the "
              "policy learns. Normal; watch it (§2.1).",
        "zh": "vf_loss 先降后升，同时 Actor 在进步：策略变化导致回报分布变化。正常现象，注意观察（§2.1）。"},
    "kl_drift": {
        "en": "The KL to the reference policy is above 0.1 and rising: the policy drifts away from the reference "
              "(§1.6, §3.6). Raise kl_loss_coef / algorithm.kl_ctrl.kl_coef, or use the adaptive controller.",
        "zh": "与参考策略的 KL 超过 0.1 且持续上升：策略偏离参考策略（§1.6、§3.6）。"
              "增大 kl_loss_coef / algorithm.kl_ctrl.kl_coef，或使用自适应 KL 控制器。"},
    "response_truncation": {
        "en": "Many responses hit max_response_length (clip_ratio > 0.3, mean ~ max): they are cut before they "
              "finish (§4.1, §4.2). Raise data.max_response_length.",
        "zh": "大量响应达到 max_response_length（clip_ratio > 0.3，mean 接近 max）：生成被截断（§4.1、§4.2）。"
              "增大 data.max_response_length。"},
    "prompt_truncation": {
        "en": "More than 10% of prompts hit max_prompt_length: the model sees cut inputs (§4.4). Raise "
              "data.max_prompt_length.",
        "zh": "超过 10% 的提示达到 max_prompt_length：模型看到的是被截断的输入（§4.4）。增大 data.max_prompt_length。"},
    "out_of_memory": {
        "en": "Memory reached its limit (perf/max_memory_allocated_gb near the cap, or the run stopped out of "
              "memory) (§7.5, §11.2 problem 3). Use smaller micro batches, gradient checkpointing or dynamic "
              "batch sizes.",
        "zh": "内存达到上限（perf/max_memory_allocated_gb 接近上限，或训练因内存溢出而停止）（§7.5、§11.2 问题 3）。"
              "减小 micro batch、启用梯度检查点或动态批次大小。"},
    "generation_bottleneck": {
        "en": "Generation takes more than half of each step (§6.1, §11.2 problem 4): larger rollout batches, "
              "fewer or shorter samples, a KV cache.",
        "zh": "生成占每步一半以上的时间（§6.1、§11.2 问题 4）：增大采样批次、减少或缩短样本、使用 KV cache。"},
    "update_bottleneck": {
        "en": "The actor update takes more than 40% of each step (§11.2 problem 4): larger micro batches, fewer "
              "ppo_epochs.",
        "zh": "Actor 更新占每步 40% 以上的时间（§11.2 问题 4）：增大 micro batch，减少 ppo_epochs。"},
    "low_mfu": {
        "en": "The actor's MFU is below 20% of the device's peak (§7.4); a tiny model always is. Larger micro "
              "batches or dynamic batch sizes raise it.",
        "zh": "Actor 的 MFU 低于设备峰值的 20%（§7.4）；小模型一向如此。增大 micro batch 或使用动态批次大小可以提高。"},
}

# The remedy as Hydra overrides: id -> family ("*" = any) -> [(key, op, fallback key)]. Ops: "=V" sets V;
# "*F", "/F", "+N" change the current value (kept an integer for integer keys; "<current*F>" when unknown);
# "raise:V" sets max(V, current x 10), so a zero or negative coefficient becomes V.
FIXES: dict[str, dict[str, list[tuple[str, str, str | None]]]] = {
    "lr_too_high": {"*": [("actor_rollout_ref.actor.optim.lr", "/10", None)]},
    "lr_too_low": {"*": [("actor_rollout_ref.actor.optim.lr", "*10", None)]},
    "critic_undertrained": {"*": [("critic.optim.lr", "*10", None), ("critic.ppo_epochs", "*2", None)]},
    "entropy_collapse": {"*": [("actor_rollout_ref.actor.entropy_coeff", "raise:0.01", None)]},
    "overly_deterministic": {"*": [("actor_rollout_ref.actor.entropy_coeff", "raise:0.01", None)]},
    "gradient_explosion": {"*": [("actor_rollout_ref.actor.grad_clip", "=1.0", None),
                                 ("actor_rollout_ref.actor.optim.lr", "/10", None)]},
    "training_crash": {"*": [("actor_rollout_ref.actor.grad_clip", "=1.0", None),
                             ("actor_rollout_ref.actor.optim.lr", "/10", None)]},
    "vanishing_gradient": {"gym": [("algorithm.norm_adv", "=True", None), ("reward.scale", "=1.0", None)],
                           "token": [("reward.scale", "=1.0", None)]},
    # the guide: lower the lr, or raise grad_clip with care; the norm measured here does not follow the lr (the
    # gradient is taken before the step), so the fix that clears it is the clip
    "grad_clip_saturation": {"*": [("actor_rollout_ref.actor.grad_clip", "*2", None)]},
    "no_learning_signal": {"token": [("reward.partial_credit", "=True", None)]},  # shape the reward
    "unstable_policy_loss": {"gym": [("env.num_envs", "*2", None)],
                             "*": [("data.train_batch_size", "*2", None),
                                   ("actor_rollout_ref.actor.ppo_mini_batch_size", "*2", None)]},
    "advantage_not_normalized": {"gym": [("algorithm.norm_adv", "=True", None)],
                                 "token": [("algorithm.norm_adv", "=True", None)]},
    "reward_variance_too_large": {"gym": [("reward.noise_std", "=0.0", None)],
                                  "token": [("reward.noise_std", "=0.0", None)]},
    # measured on the tiny GPT: 0.01 and 0.1 only delay the drift (KL 0.2 at 60 and 0.56 at 150 steps); 0.5 holds
    # it under 0.05 (at the price of reward: the policy stays near its base)
    "kl_drift": {"*": [("actor_rollout_ref.actor.kl_loss_coef", "raise:0.5", None)]},
    "response_truncation": {"*": [("data.max_response_length", "*2", None)]},
    "prompt_truncation": {"*": [("data.max_prompt_length", "*2", None)]},
    "out_of_memory": {"*": [("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "/2",
                             "actor_rollout_ref.actor.ppo_mini_batch_size")]},
    "update_bottleneck": {"*": [("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "*2", None)]},
}
# kl_drift from the in-reward penalty names the controller's coefficient instead of kl_loss_coef.
KL_IN_REWARD_FIX = [("algorithm.kl_ctrl.kl_coef", "raise:0.01", None)]

MISSING = object()


def config_value(config: Mapping[str, Any] | None, key: str) -> Any:
    """`a.b.c` in a plain nested dict, or `MISSING`."""
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return MISSING
        node = node[part]
    return node


def _apply(op: str, current: Any) -> str:
    if op.startswith("="):
        return op[1:]
    if op.startswith("raise:"):
        floor = float(op[len("raise:"):])
        if isinstance(current, (int, float)) and not isinstance(current, bool):
            return fmt(max(floor, float(current) * 10))
        return fmt(floor)
    if not isinstance(current, (int, float)) or isinstance(current, bool):
        return f"<current{op}>"
    factor = float(op[1:])
    value = {"*": current * factor, "/": current / factor, "+": current + factor}[op[0]]
    if isinstance(current, int):
        return str(max(1, int(round(value))))
    return fmt(value)


def render_fix(finding_id: str, family: str, config: Mapping[str, Any] | None = None,
               steps: list[tuple[str, str, str | None]] | None = None) -> str:
    """The id's remedy as space-separated Hydra overrides, using the run's current values when known.

    Args:
        finding_id: a catalogue id. family: gym | token | llm (picks a family's own keys where they differ).
        config: the run's resolved config as a plain dict (None: values become `<current/10>` placeholders).
        steps: overrides to render instead of the id's own (see `FIXES`).

    Returns:
        e.g. "actor_rollout_ref.actor.optim.lr=3e-05"; "" where the guide names no key.
    """
    if steps is None:
        by_family = FIXES.get(finding_id, {})
        steps = by_family.get(family, by_family.get("*", []))
    parts = []
    for key, op, fallback in steps:
        current = config_value(config, key)
        if (current is MISSING or current is None) and fallback is not None:
            current = config_value(config, fallback)
        parts.append(f"{key}={_apply(op, None if current is MISSING else current)}")
    return " ".join(parts)
