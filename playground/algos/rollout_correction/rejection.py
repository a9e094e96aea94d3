"""verl's rollout rejection sampling (`rollout_rs`, `rollout_corr_helper.compute_rollout_rejection_mask`): a hard
trust region that drops tokens or whole sequences whose divergence between the training and the rollout policy is
out of bounds, by zeroing them in the response mask (the loss, and in decoupled mode the advantage and the critic,
then skip them).

Per token, with `log r = logp_old − logp_rollout` clamped to ±20: `k1 = −log r`, `k2 = ½(log r)²`,
`k3 = r − 1 − log r`. An option aggregates one of them per token (`token_k*`), or per sequence as the sum, the mean or
the max over its valid tokens (`seq_sum_k*`, `seq_mean_k*`, `seq_max_k*`); `seq_mean_k1` is the geometric mean ratio
("Geo-RS"). k1 options keep [log lower, log upper] (ratio bounds), the others ≤ upper. Several options chain: a token
stays only if every option keeps it. Shapes `(bs, T)` or `(K, bs, T)`; metrics per agent, unprefixed.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from playground.algos.masked import TOKEN_DIMS, masked_mean, masked_sum
from playground.algos.rollout_correction.spec import TOKEN_RS_OPTIONS, parse_rs_options, parse_rs_thresholds

SAFETY_BOUND = 20.0


def _divergences(log_ratio: Tensor) -> dict[str, Tensor]:
    safe = log_ratio.clamp(-SAFETY_BOUND, SAFETY_BOUND)
    return {"k1": -safe, "k2": 0.5 * safe.square(), "k3": torch.exp(safe) - 1.0 - safe}


def _sequence_statistic(kind: str, per_token: Tensor, response_mask: Tensor) -> Tensor:
    """`(*, bs)`: the sum, mean or max of a per-token statistic over each row's valid tokens (max 0 for an empty
    row, as verl)."""
    if kind == "sum":
        return masked_sum(per_token, response_mask, dim=-1)
    if kind == "mean":
        return masked_mean(per_token, response_mask, dim=-1)
    largest = torch.where(response_mask.bool(), per_token, -torch.inf).amax(dim=-1)
    return torch.where(torch.isinf(largest), torch.zeros_like(largest), largest)


def compute_rollout_rejection_mask(log_ratio: Tensor, response_mask: Tensor, rollout_rs: str = "token_k1",
                                   rollout_rs_threshold: str | float | None = None) -> tuple[Tensor, dict[str, Tensor]]:
    """The response mask with rejected tokens zeroed, and verl's `rollout_rs_*` metrics:

    per option `rollout_rs_<option>_*` (`compute_rs_metrics`) and `rollout_rs_<option>_masked_fraction` (share of
    valid tokens it rejects), `rollout_rs_<option>_seq_masked_fraction` (share of valid rows it touches); over all
    options `rollout_rs_masked_fraction` (share of valid tokens rejected) and `rollout_rs_seq_masked_fraction` (share
    of all rows with a rejected token).
    """
    options = parse_rs_options(rollout_rs)
    thresholds = parse_rs_thresholds(options, rollout_rs_threshold)
    divergences = _divergences(log_ratio)
    valid = response_mask.bool()
    seq_valid = response_mask.sum(dim=-1) > 0  # (*, bs)
    floats = log_ratio.dtype
    combined = torch.ones_like(response_mask, dtype=floats)
    metrics: dict[str, Tensor] = {}
    for option in options:
        lower, upper = thresholds[option]
        kind, estimator = option.rsplit("_", 1)  # "token", "seq_sum", "seq_mean", "seq_max"; "k1".."k3"
        is_k1 = estimator == "k1"
        log_band = None  # k1: the log-ratio lies between the ratio band's logs; the others: a divergence <= upper
        if is_k1:
            assert lower is not None, "parse_rs_thresholds gives a k1 option both bounds"
            log_band = (math.log(lower), math.log(upper))
        per_token = divergences[estimator]
        per_sequence: Tensor | None
        if option in TOKEN_RS_OPTIONS:
            per_sequence, statistic = None, per_token
        else:
            per_sequence = _sequence_statistic(kind.removeprefix("seq_"), per_token, response_mask)
            statistic = per_sequence.unsqueeze(-1).expand_as(response_mask)
        keep = (statistic >= log_band[0]) & (statistic <= log_band[1]) if log_band is not None else statistic <= upper
        keep_mask = keep.to(floats)
        combined = combined * keep_mask
        metrics.update(compute_rs_metrics(
            option, statistic, response_mask, seq_valid, level="token" if per_sequence is None else "sequence",
            per_sequence_values=per_sequence, threshold=upper if log_band is None else log_band[1],
            threshold_lower=0.0 if log_band is None else log_band[0], apply_lower_threshold=is_k1))
        metrics[f"rollout_rs_{option}_masked_fraction"] = masked_mean(1 - keep_mask, response_mask)
        seq_kept = (~(~keep & valid)).all(dim=-1)
        seq_valid_float = seq_valid.to(floats)
        rows_valid = seq_valid_float.sum(dim=-1)
        touched = ((1.0 - seq_kept.to(floats)) * seq_valid_float).sum(dim=-1) / rows_valid.clamp(min=1)
        metrics[f"rollout_rs_{option}_seq_masked_fraction"] = torch.where(rows_valid > 0, touched,
                                                                          torch.zeros_like(touched))
    metrics["rollout_rs_masked_fraction"] = masked_mean(1 - combined, response_mask)
    final_keep = (combined > 0.5) & valid
    metrics["rollout_rs_seq_masked_fraction"] = (~final_keep & valid).any(dim=-1).to(floats).mean(dim=-1)
    return (response_mask * combined).to(response_mask.dtype), metrics


def _valid_rows_stats(values: Tensor, seq_valid: Tensor) -> dict[str, Tensor]:
    """Mean, unbiased std (0 with ≤ 1 row), max and min over the valid rows, per agent; 0 where none is valid."""
    floats = values.dtype
    count = seq_valid.to(floats).sum(dim=-1)
    mean = torch.where(seq_valid, values, 0.0).sum(dim=-1) / count.clamp(min=1)
    centred = torch.where(seq_valid, values - mean.unsqueeze(-1), 0.0)
    std = (centred.square().sum(dim=-1) / (count - 1).clamp(min=1)).sqrt()
    top = torch.where(seq_valid, values, -torch.inf).amax(dim=-1)
    bottom = torch.where(seq_valid, values, torch.inf).amin(dim=-1)
    some = count > 0
    zero = torch.zeros_like(mean)
    return {"mean": torch.where(some, mean, zero), "std": torch.where(count > 1, std, zero),
            "max": torch.where(some, top, zero), "min": torch.where(some, bottom, zero), "count": count}


def _valid_rows_share(flags: Tensor, seq_valid: Tensor, count: Tensor) -> Tensor:
    share = (flags & seq_valid).to(count.dtype).sum(dim=-1) / count.clamp(min=1)
    return torch.where(count > 0, share, torch.zeros_like(share))


def compute_rs_metrics(option: str, statistic: Tensor, response_mask: Tensor, seq_valid: Tensor, *, level: str,
                       per_sequence_values: Tensor | None, threshold: float, threshold_lower: float,
                       apply_lower_threshold: bool) -> dict[str, Tensor]:
    """verl's `compute_rs_metrics` for one option (k1 thresholds in log space), per agent, `rollout_rs_<option>_`:

    `mean` (token mean of the statistic); `max`/`min` and `fraction_high`/`fraction_low` over the valid rows'
    values (sequence options) or the valid tokens (token options); `std` of the statistic clamped to
    [lower (k1) or 0, upper] (0 with ≤ 1 valid token); over the valid rows' values (a token option: each row's
    token mean) `seq_mean`, `seq_std` (unbiased), `seq_max`, `seq_min`, `seq_max_deviation` (max |value|, the ideal
    being 0), `seq_fraction_high` and for k1 `seq_fraction_low`.
    """
    prefix = f"rollout_rs_{option}"
    floats = statistic.dtype
    valid = response_mask.bool()
    seq_values = per_sequence_values if per_sequence_values is not None else masked_mean(statistic, response_mask,
                                                                                          dim=-1)
    rows = _valid_rows_stats(seq_values, seq_valid)
    some_rows = rows["count"] > 0
    metrics = {f"{prefix}_mean": masked_mean(statistic, response_mask)}
    token_max = torch.where(valid, statistic, -torch.inf).amax(dim=TOKEN_DIMS)
    token_min = torch.where(valid, statistic, torch.inf).amin(dim=TOKEN_DIMS)
    token_high = masked_mean((statistic > threshold).to(floats), response_mask)
    token_low = masked_mean((statistic < threshold_lower).to(floats), response_mask)
    seq_high = _valid_rows_share(seq_values > threshold, seq_valid, rows["count"])
    seq_low = _valid_rows_share(seq_values < threshold_lower, seq_valid, rows["count"])
    by_rows = some_rows if level == "sequence" else torch.zeros_like(some_rows)
    metrics[f"{prefix}_max"] = torch.where(by_rows, rows["max"], token_max)
    metrics[f"{prefix}_min"] = torch.where(by_rows, rows["min"], token_min)
    metrics[f"{prefix}_fraction_high"] = torch.where(by_rows, seq_high, token_high)
    low = torch.where(by_rows, seq_low, token_low)
    metrics[f"{prefix}_fraction_low"] = low if apply_lower_threshold else torch.zeros_like(low)
    clamped = statistic.clamp(min=threshold_lower if apply_lower_threshold else 0.0, max=threshold)
    mean_clamped = masked_mean(clamped, response_mask)
    variance = masked_mean(clamped.square(), response_mask) - mean_clamped.square()
    several = response_mask.sum(dim=TOKEN_DIMS) > 1
    metrics[f"{prefix}_std"] = torch.where(several, variance.clamp(min=0.0).sqrt(), torch.zeros_like(variance))
    metrics[f"{prefix}_seq_mean"] = rows["mean"]
    metrics[f"{prefix}_seq_std"] = rows["std"]
    metrics[f"{prefix}_seq_max"] = rows["max"]
    metrics[f"{prefix}_seq_min"] = rows["min"]
    deviation = torch.where(seq_valid, seq_values.abs(), -torch.inf).amax(dim=-1)
    metrics[f"{prefix}_seq_max_deviation"] = torch.where(some_rows, deviation, torch.zeros_like(deviation))
    metrics[f"{prefix}_seq_fraction_high"] = seq_high
    if apply_lower_threshold:
        metrics[f"{prefix}_seq_fraction_low"] = seq_low
    return metrics
