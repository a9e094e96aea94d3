"""verl's bypass mode losses (`core_algos.compute_policy_loss_bypass_mode`, `compute_policy_loss_reinforce`): two
policies, the rollout's and the current one. The trainer sets `old_log_probs = rollout_log_probs` (no recompute), and
each micro-batch computes rollout correction between the current policy and the rollout, then:

- `loss_type=ppo_clip`: PPO's clipped surrogate with ratio π_θ/π_rollout; no extra IS weights (the ratio is the
  correction: multiplying by them would count it twice). Rejection sampling still masks tokens.
- `loss_type=reinforce`: `−A·w·logp` with w = the (detached) IS weights π_θ/π_rollout, no clipping.

Both log the `rollout_corr/*` diagnostics of the current policy against the rollout, per micro-batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from playground.algos.aggregate import agg_loss
from playground.algos.losses import compute_policy_loss_vanilla
from playground.algos.masked import masked_mean
from playground.algos.rollout_correction.importance import compute_rollout_correction_and_rejection_mask
from playground.algos.rollout_correction.spec import RolloutCorrectionSpec
from playground.metric_names import PPO_KL


def compute_policy_loss_reinforce(rollout_log_prob: Tensor, log_prob: Tensor, advantages: Tensor,
                                  response_mask: Tensor, loss_agg_mode: str = "seq-mean-token-sum",
                                  rollout_is_weights: Tensor | None = None) -> tuple[Tensor, dict[str, Tensor]]:
    """REINFORCE, verl's `compute_policy_loss_reinforce`: per token `−A·logp`, times the IS weights when given,
    aggregated by `loss_agg_mode`. `actor/ppo_kl` = token mean of (logp_rollout − logp)."""
    pg_losses = -advantages * log_prob
    if rollout_is_weights is not None:
        pg_losses = pg_losses * rollout_is_weights
    pg_loss = agg_loss(pg_losses, response_mask, loss_agg_mode)
    return pg_loss, {PPO_KL: masked_mean((rollout_log_prob - log_prob).detach(), response_mask)}


def compute_policy_loss_bypass_mode(old_log_prob: Tensor, log_prob: Tensor, advantages: Tensor,
                                    response_mask: Tensor, loss_agg_mode: str = "token-mean", *,
                                    rollout_correction: RolloutCorrectionSpec,
                                    ppo_kwargs: Mapping[str, Any]) -> tuple[Tensor, dict[str, Tensor]]:
    """verl's bypass loss. `old_log_prob` is the rollout's; `rollout_correction`: `algorithm.rollout_correction`;
    `ppo_kwargs`: the clip ratios for `loss_type=ppo_clip` (`compute_policy_loss_vanilla`'s keywords).

    Returns the loss and the policy loss's metrics plus `rollout_corr/*` (current policy vs the rollout).
    """
    loss_type = rollout_correction.loss_type
    with torch.no_grad():
        weights, mask, corr_metrics = compute_rollout_correction_and_rejection_mask(
            log_prob.detach(), old_log_prob, response_mask, **rollout_correction.correction_kwargs())
    if loss_type == "reinforce":
        pg_loss, metrics = compute_policy_loss_reinforce(old_log_prob, log_prob, advantages, mask, loss_agg_mode,
                                                         rollout_is_weights=weights)
    elif loss_type == "ppo_clip":
        pg_loss, metrics = compute_policy_loss_vanilla(old_log_prob, log_prob, advantages, mask, loss_agg_mode,
                                                       **ppo_kwargs)
    else:
        raise ValueError(f"loss_type={loss_type!r}: allowed 'reinforce' or 'ppo_clip'")
    return pg_loss, {**metrics, **corr_metrics}
