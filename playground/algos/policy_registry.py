"""The policy losses' registry (`actor_rollout_ref.actor.policy_loss.loss_mode`), apart from the losses, so that
`losses` and `policy_losses_extra` both register into it without importing each other.

A policy loss takes `(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode)` positionally and, as keyword
arguments, only the config keys it reads (`POLICY_LOSS_KEYWORDS`, verl's key names; `generator` is Clip-Cov's draw).
The actor passes each mode `POLICY_LOSSES.select(mode, every_key)`.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

from playground.algos import names
from playground.algos.registry import Registry

# `actor.clip_ratio*` and `actor.policy_loss.*`, a generator per agent for Clip-Cov's random pick of tokens, and
# `rollout_is_weights`, rollout correction's per-token IS weights (`algorithm.rollout_correction`), which every loss
# takes, as in verl.
POLICY_LOSS_KEYWORDS = ("clip_ratio", "clip_ratio_low", "clip_ratio_high", "clip_ratio_c", "clip_cov_ratio",
                        "clip_cov_lb", "clip_cov_ub", "kl_cov_ratio", "ppo_kl_coef", "generator",
                        "rollout_is_weights")

PolicyLossFn = Callable[..., tuple[Tensor, dict[str, Tensor]]]
POLICY_LOSSES: Registry[PolicyLossFn] = Registry(
    "actor_rollout_ref.actor.policy_loss.loss_mode", names.POLICY_LOSSES, POLICY_LOSS_KEYWORDS,
    positional=("old_log_prob", "log_prob", "advantages", "response_mask", "loss_agg_mode"))
register_policy_loss = POLICY_LOSSES.register
get_policy_loss_fn = POLICY_LOSSES.get
