"""Per-agent hyperparameters: K configs trained as one batch read each knob as a `(K,)` tensor.

An ordinary run is K = 1. Which keys may differ between the agents of a batch is `batched.PER_AGENT_KEYS`.
`AgentHParams` reads a key when asked (the tasks and the workers' construction); `StepHParams` is everything the
training step reads, resolved once into a frozen, typed object.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from omegaconf import DictConfig, OmegaConf
from torch import Tensor

from playground.config import ConfigError, uses_critic


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


# The loss modes' own keys under actor_rollout_ref.actor.policy_loss (each loss reads those it needs).
POLICY_LOSS_KEYS = ("clip_cov_ratio", "clip_cov_lb", "clip_cov_ub", "kl_cov_ratio", "ppo_kl_coef")


@dataclass(frozen=True, eq=False)
class StepHParams:
    """Everything a training step reads, resolved once from the K configs (`resolve_step_hparams`): per-agent
    values as `(K,)` or `(K, 1, 1)` tensors on the device, shared values as plain Python values. Nothing in the
    step looks a setting up by its config key."""

    num_agents: int
    # what runs
    use_critic: bool
    use_kl_loss: bool
    use_kl_in_reward: bool
    use_dynamic_sampling: bool  # algorithm.filter_groups.enable
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


def resolve_step_hparams(cfgs: Sequence[DictConfig], hp: AgentHParams) -> StepHParams:
    """The step's settings of K configs (which may differ only in `batched.PER_AGENT_KEYS`)."""
    cfg = cfgs[0]
    actor, algo, trainer = "actor_rollout_ref.actor", cfg.algorithm, cfg.trainer
    actor_cfg = cfg.actor_rollout_ref.actor
    return StepHParams(
        num_agents=len(cfgs),
        use_critic=uses_critic(cfg), use_kl_loss=bool(actor_cfg.use_kl_loss),
        use_kl_in_reward=bool(algo.use_kl_in_reward), use_dynamic_sampling=bool(algo.filter_groups.enable),
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
        total_steps=tuple(int(c.trainer.total_training_steps) for c in cfgs),
        diverge_patience=int(trainer.diverge_patience))
