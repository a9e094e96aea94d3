"""Masked reductions, as verl's `verl/utils/torch_functional.py` (v0.7), over the token dims.

Every function reduces over the last two dims `(bs, response_length)` and keeps any leading dims, so the same
code serves one agent `(bs, T)` and K batched agents `(K, bs, T)`; with 2-D inputs it is exactly verl's.
"""

from __future__ import annotations

import torch
from torch import Tensor

TOKEN_DIMS = (-2, -1)


def masked_sum(values: Tensor, mask: Tensor, dim: int | tuple[int, ...] = TOKEN_DIMS) -> Tensor:
    """Sum of `values` where `mask` is set; NaN outside the mask is ignored (verl zeroes it first)."""
    return torch.where(mask.bool(), values, 0.0).mul(mask).sum(dim=dim)


def masked_mean(values: Tensor, mask: Tensor, dim: int | tuple[int, ...] = TOKEN_DIMS) -> Tensor:
    """`Σ(values·mask) / (Σmask + 1e-8)`."""
    return masked_sum(values, mask, dim) / (mask.sum(dim=dim) + 1e-8)


def _keep(x: Tensor, like: Tensor) -> Tensor:
    """Reshape a per-leading-dim statistic `(*lead,)` so it broadcasts against `(*lead, bs, T)`."""
    return x.reshape(*x.shape, *([1] * (like.dim() - x.dim())))


def masked_var(values: Tensor, mask: Tensor, unbiased: bool = True) -> Tensor:
    """Masked variance, Bessel-corrected by default.

    Raises:
        ValueError: as verl, when the mask selects fewer than two elements (the correction would divide by 0).
    """
    mean = _keep(masked_mean(values, mask), values)
    variance = masked_mean((values - mean) ** 2, mask)
    if unbiased:
        mask_sum = mask.sum(dim=TOKEN_DIMS)
        smallest = int(mask_sum.min())  # one host sync per call: whitening runs once per step
        if smallest == 0:
            raise ValueError("At least one element in the mask has to be 1.")
        if smallest == 1:
            raise ValueError("The sum of the mask is one, which can cause a division by zero.")
        variance = variance * mask_sum / (mask_sum - 1)
    return variance


def masked_whiten(values: Tensor, mask: Tensor, shift_mean: bool = True) -> Tensor:
    """`(values − mean) · rsqrt(var + 1e-8)` with masked mean and unbiased masked variance."""
    mean = _keep(masked_mean(values, mask), values)
    var = _keep(masked_var(values, mask), values)
    whitened = (values - mean) * torch.rsqrt(var + 1e-8)
    return whitened + mean if not shift_mean else whitened


def entropy_from_logits(logits: Tensor) -> Tensor:
    """Entropy of the categorical distribution per position: `logsumexp(z) − Σ softmax(z)·z`.

    Args:
        logits: `(..., vocab_size)`.

    Returns:
        `(...)` entropy in nats.
    """
    pd = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - (pd * logits).sum(dim=-1)


def masked_stats(prefix: str, values: Tensor, mask: Tensor | None = None) -> dict[str, Tensor]:
    """`prefix/{mean,max,min}` per agent: over the token dims where `mask` is set (verl's `compute_data_metrics`),
    or, without a mask, over every entry of each agent's `(K, rows)`."""
    if mask is None:
        return {f"{prefix}/mean": values.mean(-1), f"{prefix}/max": values.amax(-1), f"{prefix}/min": values.amin(-1)}
    valid = mask.bool()
    return {f"{prefix}/mean": masked_mean(values, mask),
            f"{prefix}/max": torch.where(valid, values, -torch.inf).amax(dim=TOKEN_DIMS),
            f"{prefix}/min": torch.where(valid, values, torch.inf).amin(dim=TOKEN_DIMS)}
