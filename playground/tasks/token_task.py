"""Token tasks as the trainer sees them: a tiny GPT trained the way verl trains an LLM.

The base model comes from SFT (cached on disk); the reference policy is that base, frozen; the critic is a
copy of its trunk with a fresh value head. Each step samples `data.train_batch_size` prompts, repeats each
`rollout.n` times (one `uid` per prompt, as verl), generates with the KV cache, scores every response with
the rule reward (outcome reward on the last response token) and hands the trainer a verl-shaped batch with
a leading agent dim of 1: `(1, bs, prompt_length + response_length)` and `(1, bs, response_length)`.
"""

from __future__ import annotations

import copy
import math

import torch
from omegaconf import DictConfig
from torch import Tensor

from playground.algos.masked import masked_stats
from playground.config import uses_critic
from playground.hparams import AgentHParams
from playground.models.tiny_gpt import (
    GPTConfig,
    TinyGPTCritic,
    build_sequences,
    compute_log_prob,
    compute_values,
    count_flops,
    count_params,
    generate,
)
from playground.perf import device_name, peak_flops
from playground.tasks.base import Task
from playground.tasks.sft import SFTConfig, build_base_model
from playground.tasks.token_data import make_prompts, pass_at_k, score
from playground.update import Batch


def base_model_for(cfg: DictConfig):
    """The task's data, the model's config and the SFT base model (built once, then loaded from the cache)."""
    t, m = cfg.task, cfg.actor_rollout_ref.model
    data = make_prompts(t.name, min_digits=t.min_digits, max_digits=t.max_digits, num_val=t.num_val, seed=t.data_seed)
    model_cfg = GPTConfig(vocab_size=data.tokenizer.vocab_size, block_size=m.block_size, n_layer=m.n_layer,
                          n_head=m.n_head, n_embd=m.n_embd)
    return data, model_cfg, build_base_model(data, model_cfg, SFTConfig(**cfg.sft))


class TokenTask(Task):
    """The token family: prompts, the SFT base, actor/critic/reference models, rewards, validation, samples.

    Besides the interface's fields, its batch carries verl's per-row facts: `uid` (the prompt's group id),
    `prompt_length`, `response_length` (tensors), and `ground_truth`, `prompt_text`, `response_text` (lists).
    """

    family = "token"
    score_metric = "val/accuracy"  # what `task.score_target` and `trainer.stop_on_score` are measured on
    val_score_metric = None  # the score is measured on validation already
    model_input_keys = ("input_ids", "attention_mask", "position_ids", "responses")

    def __init__(self, cfgs: list[DictConfig], hp: AgentHParams, device: torch.device):
        if len(cfgs) != 1:
            raise ValueError("token tasks train one agent per process (the batched launcher runs them in turn)")
        cfg = self.cfg = cfgs[0]
        self.hp, self.device, self.num_agents = hp, device, 1
        self.data, self.model_cfg, self.base = base_model_for(cfg)
        self.tokenizer = self.data.tokenizer
        torch.manual_seed(int(cfg.trainer.seed))
        self.model = copy.deepcopy(self.base.model).to(device).train()
        self.ref_model = self.base.model.to(device).eval().requires_grad_(False)
        use_critic = uses_critic(cfg)
        self.critic_model = TinyGPTCritic.from_base(self.model).to(device).train() if use_critic else None
        self.actor = _Params(self.model)
        self.critic = _CriticView(self.critic_model) if use_critic else None
        seed = int(cfg.trainer.seed)
        self.prompt_gen = torch.Generator().manual_seed(seed)
        self.sample_gen = torch.Generator(device=device).manual_seed(seed + 1)
        self.n = int(cfg.actor_rollout_ref.rollout.n)
        self.temperature = float(cfg.actor_rollout_ref.rollout.temperature)
        # read once: the reward is scored per response
        self._reward_shape = {"format_score": float(cfg.reward.format_score),
                              "partial_credit": bool(cfg.reward.partial_credit)}
        self.peak_flops = peak_flops(device_name(device), cfg.trainer.get("peak_flops"))
        self.rows_per_step = int(cfg.data.train_batch_size) * self.n
        self.rows_per_unit = self.n  # ppo_mini_batch_size counts prompts: × rollout.n sequences (verl)

    # ---- run.json facts -----------------------------------------------------------------------------
    def describe(self) -> dict:
        return {"action_space": "token", "max_entropy": math.log(self.tokenizer.vocab_size),
                "base_val_accuracy": self.base.val_accuracy, "sft_steps": self.base.steps,
                "sft_cached": self.base.cached, "score_metric": self.score_metric,
                "num_params": count_params(self.model_cfg)}

    # ---- gen / reward -------------------------------------------------------------------------------
    @torch.no_grad()
    def _generate(self, examples, *, temperature: float, top_p: float, do_sample: bool):
        data = self.cfg.data
        prompt_ids, prompt_mask = self.data.collate_prompts(examples, width=data.max_prompt_length,
                                                            truncation=data.truncation)
        prompt_ids, prompt_mask = prompt_ids.to(self.device), prompt_mask.to(self.device)
        was_training = self.model.training
        self.model.eval()
        out = generate(self.model, prompt_ids, prompt_mask, max_new_tokens=data.max_response_length,
                       eos_id=self.tokenizer.eos_id, pad_id=self.tokenizer.pad_id, temperature=temperature,
                       top_p=top_p, do_sample=do_sample, generator=self.sample_gen)
        self.model.train(was_training)
        return prompt_ids, prompt_mask, out

    def generate(self) -> Batch:
        """Sample prompts, repeat each `rollout.n` times (interleaved, one uid per prompt) and generate."""
        prompts = self.data.sample(int(self.cfg.data.train_batch_size), self.prompt_gen)
        examples = [e for e in prompts for _ in range(self.n)]
        uid = torch.arange(len(prompts), device=self.device).repeat_interleave(self.n)
        rollout = self.cfg.actor_rollout_ref.rollout
        prompt_ids, prompt_mask, out = self._generate(examples, temperature=self.temperature,
                                                      top_p=float(rollout.top_p), do_sample=True)
        input_ids, attention_mask, position_ids = build_sequences(prompt_ids, prompt_mask, out)
        one = lambda x: x.unsqueeze(0)  # noqa: E731 - the agent dim
        return {"input_ids": one(input_ids), "attention_mask": one(attention_mask),
                "position_ids": one(position_ids), "responses": one(out.responses),
                "response_mask": one(out.response_mask.float()), "uid": one(uid),
                "prompt_length": one(prompt_mask.sum(-1)), "response_length": one(out.response_mask.sum(-1)),
                "ground_truth": [[e.answer for e in examples]], "prompt_text": [[e.prompt for e in examples]]}

    def compute_scores(self, batch: Batch) -> None:
        """The rule reward of each response on its last valid token; the reward trained on adds scale/noise."""
        texts = self.data.decode_responses(batch["responses"][0].cpu())
        reward = self.cfg.reward
        results = [score(text, answer, **self._reward_shape) for text, answer in zip(texts, batch["ground_truth"][0])]
        seq_scores = torch.tensor([r["score"] for r in results], device=self.device)
        batch["response_text"] = [texts]
        mask = batch["response_mask"][0]
        last = (mask.sum(-1).long() - 1).clamp(min=0)  # (bs,) the last valid response token
        scores = torch.zeros_like(mask)
        scores[torch.arange(len(last)), last] = seq_scores
        trained = seq_scores * float(reward.scale)
        if float(reward.noise_std) > 0:
            noise = torch.randn(len(trained), generator=self.prompt_gen).to(self.device)
            trained = trained + float(reward.noise_std) * noise
        level_scores = torch.zeros_like(mask)
        level_scores[torch.arange(len(last)), last] = trained
        batch["scores"], batch["token_level_scores"] = scores.unsqueeze(0), level_scores.unsqueeze(0)

    # ---- log-probs, reference, values ---------------------------------------------------------------
    def _log_prob(self, model, mb: Batch) -> tuple[Tensor, Tensor]:
        log_probs, entropy = compute_log_prob(model, mb["input_ids"][0], mb["attention_mask"][0],
                                              mb["position_ids"][0], mb["responses"][0], self.temperature)
        return log_probs.unsqueeze(0), entropy.unsqueeze(0)

    def log_prob_and_entropy(self, mb: Batch) -> tuple[Tensor, Tensor]:
        return self._log_prob(self.model, mb)

    @torch.no_grad()
    def ref_log_prob(self, batch: Batch) -> Tensor:
        return self._log_prob(self.ref_model, batch)[0]

    def compute_advantage(self, batch: Batch, estimator, **kwargs) -> tuple[Tensor, Tensor]:
        return estimator(token_level_rewards=batch["token_level_rewards"], values=batch.get("values"),
                         response_mask=batch["response_mask"], index=batch["uid"][0], **kwargs)

    # ---- metrics ------------------------------------------------------------------------------------
    def batch_metrics(self, batch: Batch) -> dict[str, Tensor]:
        """verl's `compute_data_metrics` for sequences: scores, rewards, lengths (per agent, `(1,)`)."""
        resp_len, prompt_len = batch["response_length"].float(), batch["prompt_length"].float()
        alive = resp_len[0] > 0  # verl excludes aborted (empty) responses from score statistics
        seq_score = batch["scores"][0].sum(-1)[alive]
        rewards = batch["token_level_rewards"][0].sum(-1)[alive]
        out = {**masked_stats("critic/score", seq_score.unsqueeze(0)),
               **masked_stats("critic/rewards", rewards.unsqueeze(0)),
               **masked_stats("response_length", resp_len), **masked_stats("prompt_length", prompt_len)}
        out["critic/score/std"] = seq_score.std().view(1) if len(seq_score) > 1 else torch.zeros(1)
        out["critic/rewards/std"] = rewards.std().view(1) if len(rewards) > 1 else torch.zeros(1)
        data = self.cfg.data
        out["response_length/clip_ratio"] = (resp_len == data.max_response_length).float().mean(-1)
        out["prompt_length/clip_ratio"] = (prompt_len == data.max_prompt_length).float().mean(-1)
        return out

    def token_counts(self, batch: Batch) -> dict[str, list[int]]:
        return {"response": [int(batch["response_mask"].sum())], "total": [int(batch["attention_mask"].sum())]}

    def update_flops(self, batch: Batch, role: str, epochs: int) -> float:
        """The actor and the critic share the trunk's size: the same FLOPs per token for both."""
        return count_flops(self.model_cfg, batch["attention_mask"][0].sum(-1).tolist()) * epochs

    def samples(self, batch: Batch, step: int) -> list[list[dict]]:
        """The first `trainer.samples_per_step` rollouts of this step."""
        count = min(int(self.cfg.trainer.samples_per_step), batch["response_mask"].shape[1])
        resp_len = batch["response_length"][0]
        scores = batch["scores"][0].sum(-1)
        return [[{"step": step, "prompt": batch["prompt_text"][0][i], "answer": batch["ground_truth"][0][i],
                  "response": batch["response_text"][0][i], "reward": float(scores[i]),
                  "truncated": bool(resp_len[i] == self.cfg.data.max_response_length)} for i in range(count)]]

    def agent_metrics(self, agent: int, step: int) -> dict[str, float]:
        seen = (step - 1) * int(self.cfg.data.train_batch_size)
        return {"training/epoch": float(seen // len(self.data.train))}

    # ---- testing ------------------------------------------------------------------------------------
    @torch.no_grad()
    def validate(self) -> dict[str, Tensor]:
        """Held-out prompts: `val/score`, `val/accuracy` and `val/pass@k` for k = 1..val_kwargs.n."""
        vk = self.cfg.actor_rollout_ref.rollout.val_kwargs
        n = int(vk.n)
        examples = [e for e in self.data.val for _ in range(n)]
        do_sample = bool(vk.do_sample) and float(vk.temperature) > 0
        _, _, out = self._generate(examples, temperature=float(vk.temperature) if do_sample else 1.0,
                                   top_p=float(vk.top_p), do_sample=do_sample)
        texts = self.data.decode_responses(out.responses.cpu())
        results = [score(text, ex.answer, **self._reward_shape) for text, ex in zip(texts, examples)]
        val_score = torch.tensor([r["score"] for r in results]).view(-1, n)
        acc = torch.tensor([r["acc"] for r in results]).view(-1, n)
        metrics = {"val/score": val_score.mean().view(1), "val/accuracy": acc.mean().view(1)}
        correct = acc.sum(-1).long().tolist()
        for k in range(1, n + 1):
            metrics[f"val/pass@{k}"] = torch.tensor([sum(pass_at_k(n, c, k) for c in correct) / len(correct)])
        return metrics


class _Params:
    """The actor's parameters as the optimizer sees them (one model: no agent dim)."""

    def __init__(self, model: torch.nn.Module):
        self.params = [p for p in model.parameters() if p.requires_grad]


class _CriticView(_Params):
    """The critic as the shared update calls it: `values(batch)` → `(1, bs, response_length)`."""

    def __init__(self, critic: TinyGPTCritic):
        super().__init__(critic)
        self.model = critic

    def values(self, mb: Batch) -> Tensor:
        return compute_values(self.model, mb["input_ids"][0], mb["attention_mask"][0], mb["position_ids"][0],
                              mb["responses"].shape[-1]).unsqueeze(0)
