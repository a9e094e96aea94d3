"""Statistics of GRPO's prompt groups that verl users ask verl to log: how much of a batch teaches nothing.

GRPO gives a response the advantage (score - group mean) / (group std + eps): a response whose score equals its group's
mean gets advantage 0, and a group whose scores are all equal (all right or all wrong) gets 0 for every member. verl
logs no such share; verl PR #5770 proposes `critic/advantages/zero_adv_ratio` (the share of responses with advantage
0: it measured 62.9% on GSM8k with Qwen2.5-0.5B) and `critic/advantages/zero_adv_count`; TRL logs
`frac_reward_zero_std` (the share of groups with zero reward std). Both are read off the project's own group
mechanisms: the advantage estimators' per-row group statistics and DAPO's group filter.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from playground.algos.advantages import group_row_stats
from playground.algos.dapo import filter_groups


def zero_adv_share(scores: Tensor, index: Tensor, atol: float = 0.0) -> Tensor:
    """`(*lead,)` the share of responses whose GRPO advantage is 0: whose score equals its group's mean (within
    `atol`; a group of one has mean 0 in verl, so its response counts when its score is 0).

    Args:
        scores: `(*lead, bs)` each response's score (its token-level rewards summed); float64 keeps a group of equal
            scores exactly at its mean.
        index: `(bs,)` its prompt's group id (verl's `uid`).
    """
    _, mean, _ = group_row_stats(scores, index)
    return ((scores - mean).abs() <= atol).to(scores.dtype).mean(-1)


def _as_rows(scores: Sequence[float] | Tensor, index: Sequence[int] | Tensor) -> tuple[Tensor, Tensor]:
    values = torch.as_tensor(scores, dtype=torch.float64).flatten()
    ids = torch.as_tensor(index, dtype=torch.long).flatten()
    if values.shape != ids.shape:
        raise ValueError(f"one group id per score: {values.numel()} scores, {ids.numel()} ids")
    return values, ids


def zero_adv_ratio(scores: Sequence[float] | Tensor, index: Sequence[int] | Tensor, atol: float = 0.0) -> float:
    """`zero_adv_share` of one batch (verl PR #5770's `critic/advantages/zero_adv_ratio`); NaN for an empty one.
    With 0/1 rewards and equal groups it is the share of groups whose rewards are all equal (TRL's
    `frac_reward_zero_std`)."""
    values, ids = _as_rows(scores, index)
    return float("nan") if values.numel() == 0 else float(zero_adv_share(values, ids, atol))


def zero_std_group_ratio(scores: Sequence[float] | Tensor, index: Sequence[int] | Tensor) -> float:
    """The share of groups whose scores are all equal (TRL's `frac_reward_zero_std`; the playground's
    `train/zero_adv_group_ratio`): the groups DAPO's filter drops (`algos.dapo.filter_groups`, which keeps a group of
    one). NaN for an empty batch."""
    values, ids = _as_rows(scores, index)
    if values.numel() == 0:
        return float("nan")
    return 1 - len(filter_groups(values, ids).groups) / len(torch.unique(ids))


def group_reward_std(scores: Tensor, index: Tensor) -> Tensor:
    """`(*lead,)` the mean over prompt groups of the (unbiased, as GRPO's denominator) std of their responses' rewards:
    RAGEN's within-group reward spread (`metric_names.GROUP_REWARD_STD_MEAN`). A group of one has no spread: 0.

    Args:
        scores: `(*lead, bs)` each response's reward (its token-level rewards summed).
        index: `(bs,)` its prompt's group id (verl's `uid`).
    """
    count, _, std = group_row_stats(scores, index)
    std = torch.where(count == 1, torch.zeros_like(std), std)
    return (std / count).sum(-1) / (1 / count).sum(-1)  # each group weighs 1 whatever its size
