"""verl's rollout correction (`verl/trainer/ppo/rollout_corr_helper.py`): importance weights π_old/π_rollout between
the policy that sampled the tokens (the rollout engine) and the one that trains on them, and the off-policy
diagnostics `rollout_corr/*`. Rejection sampling is `rejection`; the choices and threshold specs `spec`.

Shapes: `(bs, T)` as verl, or `(K, bs, T)` for K batched agents; every metric is per agent (`()` or `(K,)`), where
verl takes one `.item()` over its batch (no host sync here). The log-ratio is `log r = logp_old − logp_rollout`.
Names and formulas are verl's, one for one (tests/algos/test_rollout_corr.py checks them on hand-computed values).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from playground.algos.masked import TOKEN_DIMS, masked_mean, masked_sum
from playground.algos.rollout_correction.rejection import compute_rollout_rejection_mask
from playground.algos.rollout_correction.spec import parse_is_threshold
from playground.metric_names import ROLLOUT_CORR

# verl's SAFETY_BOUND: log-ratios are clamped to ±20 before exp (exp(20) ≈ 4.9e8).
SAFETY_BOUND = 20.0


def _rows(x: Tensor) -> Tensor:
    """A per-sequence statistic `(*, bs)` to `(*, bs, 1)`."""
    return x.unsqueeze(-1)


def _row_std(x: Tensor) -> Tensor:
    """Unbiased std over the rows (`torch.std`), 0 for a single row, as verl's `seq.std() if numel > 1 else 0`."""
    return x.std(dim=-1) if x.shape[-1] > 1 else torch.zeros_like(x[..., 0])


def compute_rollout_correction_weights(log_ratio: Tensor, response_mask: Tensor, rollout_is: str = "token",
                                       rollout_is_threshold: str | float = 2.0,
                                       rollout_is_batch_normalize: bool = False) -> tuple[Tensor, dict[str, Tensor]]:
    """verl's `compute_rollout_correction_weights`: the IS weights and their `rollout_is_*` metrics (unprefixed).

    token: `w_t = exp(clamp(log r_t, ±20))`; sequence: `w = exp(clamp(Σ_t log r_t, ±20))` on every token of the row.
    Zero on padding. TIS (a single threshold u): `min(w, u)`; IcePop (`"l_u"`): `w` inside [l, u], else 0. With
    `rollout_is_batch_normalize` the weights are divided by their mean (per token, or per sequence for
    `sequence`), when it exceeds 1e-8. Detached: the weights change the measure, not the objective.
    """
    if rollout_is not in ("token", "sequence"):
        raise ValueError(f"rollout_is={rollout_is!r}: allowed 'token' or 'sequence'")
    upper, lower = parse_is_threshold(rollout_is_threshold)
    if rollout_is == "token":
        log_ratio_for_metrics = log_ratio
        raw = torch.exp(log_ratio.clamp(-SAFETY_BOUND, SAFETY_BOUND))
    else:
        log_ratio_for_metrics = _rows(masked_sum(log_ratio, response_mask, dim=-1))  # (*, bs, 1)
        raw = torch.exp(log_ratio_for_metrics.clamp(-SAFETY_BOUND, SAFETY_BOUND)).expand_as(log_ratio)
    raw = raw * response_mask
    if lower is None:
        weights = raw.clamp(max=upper)
    else:
        weights = torch.where((raw >= lower) & (raw <= upper), raw, torch.zeros_like(raw))
    metrics = compute_is_metrics(weights, raw, log_ratio_for_metrics, response_mask, rollout_is, upper, lower)
    if lower is not None:
        metrics["rollout_is_oob_ratio"] = masked_mean(((raw < lower) | (raw > upper)).to(raw.dtype), response_mask)
    weights = weights.detach()
    if rollout_is_batch_normalize:
        if rollout_is == "token":
            mean = masked_mean(weights, response_mask)
        else:
            seq_weights = masked_mean(weights, response_mask, dim=-1)
            seq_valid = (response_mask.sum(dim=-1) > 0).to(weights.dtype)
            mean = (seq_weights * seq_valid).sum(dim=-1) / seq_valid.sum(dim=-1).clamp_min(1e-8)
        usable = mean > 1e-8
        weights = torch.where(_rows(_rows(usable)), weights / _rows(_rows(mean)), weights)
        metrics["rollout_is_batch_norm_factor"] = torch.where(usable, mean, torch.ones_like(mean))
    return weights, metrics


def compute_is_metrics(weights: Tensor, raw_weights: Tensor, log_ratio_for_metrics: Tensor, response_mask: Tensor,
                       rollout_is: str, threshold: float, threshold_lower: float | None = None) -> dict[str, Tensor]:
    """verl's `compute_is_metrics` (before any batch normalisation), per agent:

    - `rollout_is_mean`: token mean of the applied weights.
    - token level: `rollout_is_max/min` over valid tokens of the applied weights; `ratio_fraction_high/low`: share
      of valid tokens whose raw weight is > u / < l (l = 1/u for TIS).
    - sequence level: `rollout_is_max/min` = exp of the largest/smallest Σ log r over the rows (max capped at
      exp(20)); `ratio_fraction_high/low`: share of rows with Σ log r > log u / < log l.
    - `rollout_is_std`: √(E[w²] − E[w]²) of the weights clamped to [0, u] (0 with ≤ 1 valid token);
      `rollout_is_eff_sample_size`: 1 / E[(w/(E[w] + 1e-8))²] over valid tokens, same clamp (1 = uniform weights).
    - per row `s_i` = the row's mean weight: `rollout_is_seq_{mean,std,max,min}` over all rows,
      `seq_max_deviation` = max |s_i − 1|, `seq_fraction_high/low` = share of rows whose mean raw weight is > u / < l.
    """
    lower = 1.0 / threshold if threshold_lower is None else threshold_lower
    floats = weights.dtype
    metrics: dict[str, Tensor] = {}
    if rollout_is == "sequence":
        metrics["rollout_is_max"] = torch.exp(log_ratio_for_metrics.amax(dim=TOKEN_DIMS).clamp(max=SAFETY_BOUND))
        metrics["rollout_is_min"] = torch.exp(log_ratio_for_metrics.amin(dim=TOKEN_DIMS))
        metrics["rollout_is_mean"] = masked_mean(weights, response_mask)
        metrics["rollout_is_ratio_fraction_high"] = (log_ratio_for_metrics > math.log(threshold)).to(floats).mean(
            dim=TOKEN_DIMS)
        metrics["rollout_is_ratio_fraction_low"] = (log_ratio_for_metrics < math.log(lower)).to(floats).mean(
            dim=TOKEN_DIMS)
    else:
        valid = response_mask.bool()
        metrics["rollout_is_mean"] = masked_mean(weights, response_mask)
        metrics["rollout_is_ratio_fraction_high"] = masked_mean((raw_weights > threshold).to(floats), response_mask)
        metrics["rollout_is_ratio_fraction_low"] = masked_mean((raw_weights < lower).to(floats), response_mask)
        metrics["rollout_is_max"] = torch.where(valid, weights, -torch.inf).amax(dim=TOKEN_DIMS)
        metrics["rollout_is_min"] = torch.where(valid, weights, torch.inf).amin(dim=TOKEN_DIMS)
    clamped = weights.clamp(min=0.0, max=threshold)
    mean_clamped = masked_mean(clamped, response_mask)
    variance = masked_mean(clamped.square(), response_mask) - mean_clamped.square()
    several = response_mask.sum(dim=TOKEN_DIMS) > 1
    metrics["rollout_is_std"] = torch.where(several, variance.clamp(min=0.0).sqrt(), torch.zeros_like(variance))
    normalized = clamped / _rows(_rows(mean_clamped + 1e-8))
    metrics["rollout_is_eff_sample_size"] = 1.0 / masked_mean(normalized.square(), response_mask)
    seq_weights = masked_mean(weights, response_mask, dim=-1)  # (*, bs)
    metrics["rollout_is_seq_mean"] = seq_weights.mean(dim=-1)
    metrics["rollout_is_seq_std"] = _row_std(seq_weights)
    metrics["rollout_is_seq_max"] = seq_weights.amax(dim=-1)
    metrics["rollout_is_seq_min"] = seq_weights.amin(dim=-1)
    metrics["rollout_is_seq_max_deviation"] = (seq_weights - 1.0).abs().amax(dim=-1)
    raw_seq_weights = masked_mean(raw_weights, response_mask, dim=-1)
    metrics["rollout_is_seq_fraction_high"] = (raw_seq_weights > threshold).to(floats).mean(dim=-1)
    metrics["rollout_is_seq_fraction_low"] = (raw_seq_weights < lower).to(floats).mean(dim=-1)
    return metrics


def compute_offpolicy_metrics(old_log_prob: Tensor, rollout_log_prob: Tensor | None,
                              response_mask: Tensor) -> dict[str, Tensor]:
    """verl's `compute_offpolicy_metrics` (unprefixed), per agent. Per row i, `m_i` is the mean log-prob over its valid
    tokens (training: old, rollout: rollout); means below are over all rows unless said.

    - `training_ppl` = mean_i exp(−m_i^train), `training_log_ppl` = mean_i(−m_i^train); `rollout_ppl`,
      `rollout_log_ppl` the same with the rollout's log-probs.
    - `kl` = token mean of (logp_rollout − logp_old): the k1 estimate of KL(π_rollout ‖ π_old).
    - `k3_kl` = token mean of (r − log r − 1), r = π_old/π_rollout (≥ 0, 0 when they agree).
    - `log_ppl_diff` = mean_i(m_i^rollout − m_i^train) (= log(training_ppl_i / rollout_ppl_i)), `log_ppl_abs_diff`
      its mean absolute value, `log_ppl_diff_max/min` over rows; `ppl_ratio` = mean_i exp(that difference).
    - `chi2_token` = token mean of r² − 1 (r clamped in log space to ±20); `chi2_seq` = mean_i exp(2·clamp(Σ_t log r))
      − 1: the χ² divergences whose size sets the IS weights' variance.
    """
    train_mean = masked_mean(old_log_prob, response_mask, dim=-1)  # (*, bs)
    metrics = {"training_ppl": torch.exp(-train_mean).mean(dim=-1), "training_log_ppl": (-train_mean).mean(dim=-1)}
    if rollout_log_prob is None:
        return metrics
    metrics["kl"] = masked_mean(rollout_log_prob - old_log_prob, response_mask)
    log_ratio = old_log_prob - rollout_log_prob
    metrics["k3_kl"] = masked_mean(torch.exp(log_ratio) - log_ratio - 1, response_mask)
    rollout_mean = masked_mean(rollout_log_prob, response_mask, dim=-1)
    metrics["rollout_ppl"] = torch.exp(-rollout_mean).mean(dim=-1)
    metrics["rollout_log_ppl"] = (-rollout_mean).mean(dim=-1)
    log_ppl_diff = rollout_mean - train_mean
    metrics["log_ppl_diff"] = log_ppl_diff.mean(dim=-1)
    metrics["log_ppl_abs_diff"] = log_ppl_diff.abs().mean(dim=-1)
    metrics["log_ppl_diff_max"] = log_ppl_diff.amax(dim=-1)
    metrics["log_ppl_diff_min"] = log_ppl_diff.amin(dim=-1)
    metrics["ppl_ratio"] = torch.exp(log_ppl_diff).mean(dim=-1)
    rho = torch.exp(log_ratio.clamp(-SAFETY_BOUND, SAFETY_BOUND))
    metrics["chi2_token"] = masked_mean(rho.square(), response_mask) - 1.0
    log_ratio_sum = masked_sum(log_ratio, response_mask, dim=-1).clamp(-SAFETY_BOUND, SAFETY_BOUND)
    metrics["chi2_seq"] = torch.exp(2.0 * log_ratio_sum).mean(dim=-1) - 1.0
    return metrics


def compute_rollout_correction_and_rejection_mask(
        old_log_prob: Tensor, rollout_log_prob: Tensor, response_mask: Tensor, rollout_is: str | None = None,
        rollout_is_threshold: str | float | None = 2.0, rollout_is_batch_normalize: bool = False,
        rollout_rs: str | None = None, rollout_rs_threshold: str | float | None = None,
) -> tuple[Tensor | None, Tensor, dict[str, Tensor]]:
    """verl's `compute_rollout_correction_and_rejection_mask`: `(rollout_is_weights or None, the response mask with
    the rejected tokens zeroed, metrics prefixed `rollout_corr/`)`. IS weights when `rollout_is` is set, rejection
    when `rollout_rs` is, the off-policy diagnostics always.

    Raises:
        ValueError: no valid token, mismatched shapes, or `rollout_rs` without `rollout_rs_threshold` (verl's checks).
    """
    if not bool(response_mask.any()):
        raise ValueError("response_mask must contain at least one valid token (1).")
    if old_log_prob.shape != rollout_log_prob.shape or old_log_prob.shape != response_mask.shape:
        raise ValueError(f"old_log_prob {tuple(old_log_prob.shape)}, rollout_log_prob "
                         f"{tuple(rollout_log_prob.shape)} and response_mask {tuple(response_mask.shape)} differ")
    log_ratio = old_log_prob - rollout_log_prob
    metrics: dict[str, Tensor] = {}
    weights = None
    if rollout_is is not None and rollout_is_threshold is not None:
        weights, is_metrics = compute_rollout_correction_weights(log_ratio, response_mask, rollout_is,
                                                                 rollout_is_threshold, rollout_is_batch_normalize)
        metrics.update(is_metrics)
    mask = response_mask.clone()
    if rollout_rs is not None:
        if rollout_rs_threshold is None:
            raise ValueError("rollout_rs_threshold must be explicitly provided when rollout_rs is enabled.")
        mask, rs_metrics = compute_rollout_rejection_mask(log_ratio, response_mask, rollout_rs, rollout_rs_threshold)
        metrics.update(rs_metrics)
    metrics.update(compute_offpolicy_metrics(old_log_prob, rollout_log_prob, response_mask))
    return weights, mask, {f"{ROLLOUT_CORR}/{key}": value.detach() for key, value in metrics.items()}
