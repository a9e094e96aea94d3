"""verl's `agg_loss`: a per-token loss to one number per agent (shared by the policy, value and entropy terms)."""

from __future__ import annotations

from torch import Tensor

from playground.algos import names
from playground.algos.masked import TOKEN_DIMS, masked_sum


def agg_loss(
    loss_mat: Tensor, loss_mask: Tensor, loss_agg_mode: str, loss_scale_factor: float | None = None
) -> Tensor:
    """Aggregate a per-token loss into one number per agent, as verl's `agg_loss` on one micro-batch.

    - `token-mean`: Σ over valid tokens / number of valid tokens.
    - `seq-mean-token-sum`: per-sequence token sums, averaged over sequences with ≥ 1 valid token.
    - `seq-mean-token-mean`: per-sequence token means, averaged over sequences with ≥ 1 valid token.
    - `seq-mean-token-sum-norm`: Σ of per-sequence token sums / `loss_scale_factor` (default: the padded
      response width); no division by the number of sequences (Dr.GRPO's normaliser).

    Args:
        loss_mat: `(bs, T)` per-token loss. loss_mask: `(bs, T)`.
        loss_agg_mode: one of `names.LOSS_AGG_MODES`.

    Returns:
        `()` (or `(K,)` for batched agents).
    """
    if loss_agg_mode == "token-mean":
        return masked_sum(loss_mat, loss_mask) / loss_mask.sum(dim=TOKEN_DIMS)
    seq_tokens = loss_mask.sum(dim=-1)  # (bs,)
    seq_losses = masked_sum(loss_mat, loss_mask, dim=-1)  # token-sum per sequence
    if loss_agg_mode == "seq-mean-token-sum-norm":
        scale = loss_mask.shape[-1] if loss_scale_factor is None else loss_scale_factor
        return seq_losses.sum(dim=-1) / scale
    if loss_agg_mode == "seq-mean-token-mean":
        seq_losses = seq_losses / (seq_tokens + 1e-8)
    elif loss_agg_mode != "seq-mean-token-sum":
        raise ValueError(f"loss_agg_mode={loss_agg_mode!r} is unknown; known: {list(names.LOSS_AGG_MODES)}")
    seq_mask = (seq_tokens > 0).to(loss_mat.dtype)  # fully masked sequences do not count
    return masked_sum(seq_losses, seq_mask, dim=-1) / seq_mask.sum(dim=-1)
