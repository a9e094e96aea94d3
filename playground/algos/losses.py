"""Loss aggregation, the PPO policy loss (registry) and the clipped value loss, as verl's `core_algos.py` (v0.7).

All functions reduce over the last two dims `(bs, response_length)` and keep leading dims (K batched
agents); clip ranges may be floats or `(K, 1, 1)` tensors. Metrics come back as tensors under verl's
names (no `.item()`: the caller reduces them once per step, so a GPU step needs no host sync).

A policy loss takes `(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode)` positionally and its
config as keyword arguments under verl's key names, with verl's defaults: only the keys it reads, so a misspelt key
is a `TypeError` (the caller picks each mode's keys with `POLICY_LOSSES.select`). The registry lives in
`policy_registry`; the other losses in `policy_losses_extra`, which this module imports (neither imports the other
back), so importing `losses` fills the registry.
"""

from __future__ import annotations

import torch
from torch import Tensor

from playground.algos import policy_losses_extra  # noqa: F401 - registers the other losses
from playground.algos.aggregate import agg_loss
from playground.algos.clip_range import resolve_clip_range
from playground.algos.masked import masked_mean, masked_var
from playground.algos.policy_registry import POLICY_LOSSES, get_policy_loss_fn, register_policy_loss
from playground.metric_names import PG_CLIPFRAC, PG_CLIPFRAC_LOWER, PPO_KL


def ppo_clip_terms(old_log_prob: Tensor, log_prob: Tensor, advantages: Tensor, clip_low: float | Tensor,
                   clip_high: float | Tensor, clip_ratio_c: float | Tensor) -> dict[str, Tensor]:
    """PPO's per-token terms, each `(..., T)`: what `compute_policy_loss_vanilla` aggregates, and what the step
    inspector shows token by token (`step.token_records`).

    `log_ratio` = clamp(logp − logp_old, ±20) (−`ppo_kl`'s term), `ratio` = exp of it; `losses` the dual-clipped
    per-token loss; `clipped` where the clipped term binds (L2 > L1: `pg_clipfrac`'s tokens; the ratio left the band
    on the side the advantage pushes it); `clipped_lower` where the dual clip binds (A < 0: `pg_clipfrac_lower`'s)."""
    negative_approx_kl = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)
    ratio = torch.exp(negative_approx_kl)
    neg_advantages = -advantages
    pg_losses1 = neg_advantages * ratio
    # a float bound beside a tensor one is fine to torch; its stubs take both floats or both tensors
    pg_losses2 = neg_advantages * torch.clamp(ratio, 1 - clip_low, 1 + clip_high)  # type: ignore[arg-type]
    clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
    pg_losses3 = neg_advantages * clip_ratio_c
    clip_pg_losses2 = torch.minimum(pg_losses3, clip_pg_losses1)
    negative = advantages < 0
    return {"log_ratio": negative_approx_kl, "ratio": ratio,
            "losses": torch.where(negative, clip_pg_losses2, clip_pg_losses1),
            "clipped": pg_losses2 > pg_losses1, "clipped_lower": (clip_pg_losses1 > pg_losses3) & negative}


@register_policy_loss("vanilla")
def compute_policy_loss_vanilla(
    old_log_prob: Tensor,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    loss_agg_mode: str = "token-mean",
    *,
    clip_ratio: float | Tensor = 0.2,
    clip_ratio_low: float | Tensor | None = None,
    clip_ratio_high: float | Tensor | None = None,
    clip_ratio_c: float | Tensor = 3.0,
    rollout_is_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """PPO's clipped surrogate (Schulman et al. 2017) with dual-clip (Ye et al. 2020, arXiv 1912.09729).

    Per token, with `r = exp(clamp(logp − logp_old, ±20))`:
    `L1 = −A·r`, `L2 = −A·clip(r, 1 − ε_low, 1 + ε_high)`, `L = max(L1, L2)`, and for A < 0 the loss
    is capped at `−A·c` (c = `clip_ratio_c` > 1), so a huge ratio on a bad action cannot blow up.

    Metrics (verl's exact definitions, means over valid tokens):
    `actor/pg_clipfrac` = fraction where the clipped term binds (L2 > L1), not "clip(r) ≠ r";
    `actor/pg_clipfrac_lower` = fraction with A < 0 where the dual clip binds;
    `actor/ppo_kl` = mean(logp_old − logp) (a k1 estimate; can be negative).

    Args:
        old_log_prob, log_prob, advantages, response_mask: `(bs, T)`.
        clip_ratio: ε; `clip_ratio_low`/`clip_ratio_high` fall back to it when None.
        rollout_is_weights: `(bs, T)` rollout correction's IS weights (decoupled mode), multiplying the per-token
            loss before aggregation, as verl passes them to every policy loss; None: none.

    Returns:
        pg_loss `()` and the metrics.
    """
    if isinstance(clip_ratio_c, float) and not clip_ratio_c > 1.0:
        raise ValueError(f"clip_ratio_c must be > 1 for dual-clip PPO, got {clip_ratio_c}")
    clip_low, clip_high = resolve_clip_range(clip_ratio, clip_ratio_low, clip_ratio_high)

    terms = ppo_clip_terms(old_log_prob, log_prob, advantages, clip_low, clip_high, clip_ratio_c)
    dtype = terms["ratio"].dtype
    ppo_kl = masked_mean(-terms["log_ratio"].detach(), response_mask)  # a metric: no graph to build
    pg_clipfrac = masked_mean(terms["clipped"].to(dtype), response_mask)
    pg_clipfrac_lower = masked_mean(terms["clipped_lower"].to(dtype), response_mask)
    pg_losses = terms["losses"]
    if rollout_is_weights is not None:
        pg_losses = pg_losses * rollout_is_weights
    pg_loss = agg_loss(pg_losses, response_mask, loss_agg_mode)
    metrics = {
        PG_CLIPFRAC: pg_clipfrac.detach(),
        PPO_KL: ppo_kl.detach(),
        PG_CLIPFRAC_LOWER: pg_clipfrac_lower.detach(),
    }
    return pg_loss, metrics


def compute_value_loss(
    vpreds: Tensor,
    returns: Tensor,
    values: Tensor,
    response_mask: Tensor,
    cliprange_value: float | Tensor,
    loss_agg_mode: str = "token-mean",
) -> tuple[Tensor, Tensor]:
    """PPO's clipped value loss, as verl's `compute_value_loss`.

    `v_clip = clamp(v_pred, V_old ± ε_v)` (absolute range); loss `0.5·agg(max((v_pred − R)², (v_clip − R)²))`;
    `vf_clipfrac` = fraction of valid tokens where the clipped error is the larger one (the clip binds).

    Args:
        vpreds: `(bs, T)` values from the critic being updated. returns: `(bs, T)` targets R.
        values: `(bs, T)` values from the critic before the update. cliprange_value: ε_v.

    Returns:
        vf_loss `()` and vf_clipfrac `()`.
    """
    vpredclipped = torch.clamp(vpreds, values - cliprange_value, values + cliprange_value)
    vf_losses1 = (vpreds - returns) ** 2
    vf_losses2 = (vpredclipped - returns) ** 2
    vf_loss = 0.5 * agg_loss(torch.maximum(vf_losses1, vf_losses2), response_mask, loss_agg_mode)
    vf_clipfrac = masked_mean((vf_losses2 > vf_losses1).to(vpreds.dtype), response_mask)
    return vf_loss, vf_clipfrac


def explained_variance(returns: Tensor, values: Tensor, response_mask: Tensor) -> Tensor:
    """verl's `critic/vf_explained_var`: `1 − Var(R − V) / (Var(R) + 1e-5)` over valid tokens, unbiased.

    1 is a perfect critic, 0 no better than a constant, below 0 worse than a constant (unbounded below).
    """
    return 1.0 - masked_var(returns - values, response_mask) / (masked_var(returns, response_mask) + 1e-5)


__all__ = ["POLICY_LOSSES", "agg_loss", "compute_policy_loss_vanilla", "compute_value_loss",
           "explained_variance", "get_policy_loss_fn", "register_policy_loss"]
