"""Per-agent hyperparameters: K configs trained as one batch read each knob as a `(K,)` tensor.

An ordinary run is K = 1. Which keys may differ between the agents of a batch is `batched.PER_AGENT_KEYS`.
`AgentHParams` reads a key when asked (the tasks' construction); `StepHParams` is everything the training step and
its workers read, resolved once into a frozen, typed object (each role's optimizer and update shape included).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from torch import Tensor

from playground.algos.rollout_correction.spec import RolloutCorrectionSpec
from playground.config import ConfigError, uses_critic
from playground.optim import warmup_steps
from playground.rollout.weights import RolloutSpec


class AgentHParams:
    """Per-agent hyperparameters of K configs as `(K,)` tensors (`view3` gives `(K, 1, 1)`)."""

    def __init__(self, cfgs: Sequence[DictConfig], device: torch.device):
        self.cfgs = list(cfgs)
        self.device = device
        self._cache: dict[tuple, torch.Tensor] = {}  # configs do not change during a run

    def vector(self, key: str, none_as: float | None = None, fallback: str | None = None) -> torch.Tensor:
        """`(K,)` values of `key`; a null value becomes `none_as`, or the value of the `fallback` key."""
        cached = self._cache.get((key, none_as, fallback))
        if cached is not None:
            return cached
        values = []
        for cfg in self.cfgs:
            value = OmegaConf.select(cfg, key)
            if value is None:
                value = OmegaConf.select(cfg, fallback) if fallback is not None else none_as
            if value is None:
                raise ConfigError(f"{key} is null and has no default")
            values.append(float(value))
        vector = torch.tensor(values, dtype=torch.float32, device=self.device)
        self._cache[(key, none_as, fallback)] = vector
        return vector

    def view3(self, key: str, **kw) -> torch.Tensor:
        return self.vector(key, **kw).view(-1, 1, 1)


@dataclass(frozen=True, eq=False)
class OptimSpec:
    """One role's optimizer and lr schedule (`<role>.optim`): AdamW's settings and, per agent, verl's schedule."""

    lr: Tensor  # (K,) the initial learning rates
    weight_decay: Tensor  # (K,)
    betas: tuple[float, ...]
    eps: float
    schedules: tuple[dict[str, Any], ...]  # per agent, `optim.lr_factor`'s keywords (its total steps included)


@dataclass(frozen=True)
class RoleShape:
    """How one role's update walks over the batch (`actor_rollout_ref.actor.*`, `critic.*`), in verl's units: a
    mini-batch counts prompts (the task turns it into rows: `workers.update_shape`), a micro-batch sequences."""

    ppo_epochs: int
    ppo_mini_batch_size: int
    ppo_micro_batch_size_per_gpu: int | None
    shuffle: bool
    loss_agg_mode: str
    max_token_len: int | None  # use_dynamic_bsz: ppo_max_token_len_per_gpu


@dataclass(frozen=True, eq=False)
class RoleSpec:
    """One trained role (the actor, the critic): its optimizer and schedule, and how its update walks the batch."""

    optim: OptimSpec
    shape: RoleShape


@dataclass(frozen=True)
class DynamicSamplingSpec:
    """DAPO's dynamic sampling (`algorithm.filter_groups`, enabled): generate until the batch is full of groups whose
    `metric` varies."""

    metric: str
    max_num_gen_batches: int  # 0: no cap
    train_batch_size: int  # groups (prompts) per step, `data.train_batch_size`
    rollout_n: int  # rows per group


@dataclass(frozen=True, eq=False)
class KLControlSpec:
    """`algorithm.kl_ctrl`: the in-reward KL's controller."""

    type: str
    kl_coef: Tensor  # (K,)
    target_kl: Tensor  # (K,)
    horizon: Tensor  # (K,)


def _optim(cfgs: Sequence[DictConfig], hp: AgentHParams, prefix: str, total_steps: Sequence[int]) -> OptimSpec:
    opt = OmegaConf.select(cfgs[0], prefix)
    schedules = []
    for cfg, total in zip(cfgs, total_steps, strict=True):
        o = OmegaConf.select(cfg, prefix)
        schedules.append({"total_steps": total, "scheduler_type": o.lr_scheduler_type, "min_lr_ratio": o.min_lr_ratio,
                          "warmup_steps": warmup_steps(o.lr_warmup_steps, o.lr_warmup_steps_ratio, total),
                          "num_cycles": o.num_cycles})
    return OptimSpec(hp.vector(f"{prefix}.lr"), hp.vector(f"{prefix}.weight_decay"), tuple(opt.betas), opt.eps,
                     tuple(schedules))


def _shape(role: DictConfig) -> RoleShape:
    return RoleShape(ppo_epochs=role.ppo_epochs, ppo_mini_batch_size=role.ppo_mini_batch_size,
                     ppo_micro_batch_size_per_gpu=role.ppo_micro_batch_size_per_gpu,
                     shuffle=bool(role.get("shuffle", False)), loss_agg_mode=role.loss_agg_mode,
                     max_token_len=int(role.ppo_max_token_len_per_gpu) if role.use_dynamic_bsz else None)


# The loss modes' own keys under actor_rollout_ref.actor.policy_loss (each loss reads those it needs).
POLICY_LOSS_KEYS = ("clip_cov_ratio", "clip_cov_lb", "clip_cov_ub", "kl_cov_ratio", "ppo_kl_coef")


@dataclass(frozen=True, eq=False)
class StepHParams:
    """Everything a training step reads, resolved once from the K configs (`resolve_step_hparams`): per-agent
    values as `(K,)` or `(K, 1, 1)` tensors on the device, shared values as plain Python values. Nothing in the
    step looks a setting up by its config key."""

    num_agents: int
    # what runs
    use_kl_loss: bool
    dynamic_sampling: DynamicSamplingSpec | None  # None: algorithm.filter_groups is off
    critic_warmup: int  # the actor updates from this step on
    # the advantage (algorithm.*)
    adv_estimator: str
    gamma: Tensor  # (K, 1, 1)
    lam: Tensor  # (K, 1, 1)
    norm_adv: bool
    norm_adv_by_std_in_grpo: bool
    kl_penalty: str  # algorithm.kl_penalty: the in-reward KL's estimator
    # the actor's loss (actor_rollout_ref.actor.*)
    policy_loss_mode: str
    clip_ratio: Tensor  # (K, 1, 1), and the three below
    clip_ratio_low: Tensor  # falls back to clip_ratio when null
    clip_ratio_high: Tensor
    clip_ratio_c: Tensor
    policy_loss: dict[str, Tensor]  # POLICY_LOSS_KEYS, each (K, 1, 1)
    entropy_coeff: Tensor  # (K, 1, 1)
    kl_loss_coef: Tensor  # (K, 1, 1)
    kl_loss_type: str
    actor_grad_clip: Tensor  # (K,), inf = off
    # the critic's loss (critic.*)
    cliprange_value: Tensor  # (K, 1, 1)
    critic_grad_clip: Tensor  # (K,), inf = off
    # validation and stopping (trainer.*)
    val_before_train: bool
    test_freq: int
    total_steps: tuple[int, ...]  # per agent
    diverge_patience: int
    seeds: tuple[int, ...]  # per agent, trainer.seed: the workers' generators start from it
    # the workers' own settings
    actor: RoleSpec
    critic: RoleSpec | None  # None: no critic trains
    kl_ctrl: KLControlSpec | None  # None: no KL in the reward
    world_model_lr: Tensor | None  # (K,); None: no world model
    rollout: RolloutSpec  # how the rollout engine differs from the trainer
    rollout_correction: RolloutCorrectionSpec

    @property
    def use_critic(self) -> bool:
        return self.critic is not None

    @property
    def use_kl_in_reward(self) -> bool:
        return self.kl_ctrl is not None


def resolve_step_hparams(cfgs: Sequence[DictConfig], hp: AgentHParams) -> StepHParams:
    """The step's settings of K configs (which may differ only in `batched.PER_AGENT_KEYS`)."""
    cfg = cfgs[0]
    actor, algo, trainer = "actor_rollout_ref.actor", cfg.algorithm, cfg.trainer
    actor_cfg = cfg.actor_rollout_ref.actor
    total_steps = tuple(int(c.trainer.total_training_steps) for c in cfgs)
    use_critic = uses_critic(cfg)
    return StepHParams(
        num_agents=len(cfgs),
        use_kl_loss=bool(actor_cfg.use_kl_loss),
        dynamic_sampling=DynamicSamplingSpec(
            str(algo.filter_groups.metric), int(algo.filter_groups.max_num_gen_batches), int(cfg.data.train_batch_size),
            int(cfg.actor_rollout_ref.rollout.n)) if algo.filter_groups.enable else None,
        critic_warmup=int(trainer.critic_warmup),
        adv_estimator=str(algo.adv_estimator), gamma=hp.view3("algorithm.gamma"), lam=hp.view3("algorithm.lam"),
        norm_adv=bool(algo.norm_adv), norm_adv_by_std_in_grpo=bool(algo.norm_adv_by_std_in_grpo),
        kl_penalty=str(algo.kl_penalty),
        policy_loss_mode=str(actor_cfg.policy_loss.loss_mode),
        clip_ratio=hp.view3(f"{actor}.clip_ratio"),
        clip_ratio_low=hp.view3(f"{actor}.clip_ratio_low", fallback=f"{actor}.clip_ratio"),
        clip_ratio_high=hp.view3(f"{actor}.clip_ratio_high", fallback=f"{actor}.clip_ratio"),
        clip_ratio_c=hp.view3(f"{actor}.clip_ratio_c"),
        policy_loss={key: hp.view3(f"{actor}.policy_loss.{key}") for key in POLICY_LOSS_KEYS},
        entropy_coeff=hp.view3(f"{actor}.entropy_coeff"), kl_loss_coef=hp.view3(f"{actor}.kl_loss_coef"),
        kl_loss_type=str(actor_cfg.kl_loss_type),
        actor_grad_clip=hp.vector(f"{actor}.grad_clip", none_as=float("inf")),
        cliprange_value=hp.view3("critic.cliprange_value"),
        critic_grad_clip=hp.vector("critic.grad_clip", none_as=float("inf")),
        val_before_train=bool(trainer.val_before_train), test_freq=int(trainer.test_freq),
        total_steps=total_steps, diverge_patience=int(trainer.diverge_patience),
        seeds=tuple(int(c.trainer.seed) for c in cfgs),
        actor=RoleSpec(_optim(cfgs, hp, f"{actor}.optim", total_steps), _shape(actor_cfg)),
        critic=RoleSpec(_optim(cfgs, hp, "critic.optim", total_steps), _shape(cfg.critic)) if use_critic else None,
        kl_ctrl=KLControlSpec(str(algo.kl_ctrl.type), hp.vector("algorithm.kl_ctrl.kl_coef"),
                              hp.vector("algorithm.kl_ctrl.target_kl"), hp.vector("algorithm.kl_ctrl.horizon"))
        if algo.use_kl_in_reward else None,
        world_model_lr=hp.vector("world_model.lr") if OmegaConf.select(cfg, "world_model.enable") else None,
        rollout=RolloutSpec.from_cfg(cfg),
        rollout_correction=RolloutCorrectionSpec.from_config(cfg.algorithm.rollout_correction))
