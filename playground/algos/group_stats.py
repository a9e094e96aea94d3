"""Statistics of GRPO's prompt groups that verl users ask verl to log: how much of a batch teaches nothing.

GRPO gives a response the advantage (score - group mean) / (group std + eps): a response whose score equals its group's
mean gets advantage 0, and a group whose scores are all equal (all right or all wrong) gets 0 for every member. verl
logs no such share; verl PR #5770 proposes `critic/advantages/zero_adv_ratio` (the share of responses with advantage
0: it measured 62.9% on GSM8k with Qwen2.5-0.5B) and `critic/advantages/zero_adv_count`; TRL logs
`frac_reward_zero_std` (the share of groups with zero reward std). The trainer wires these in; this module only
computes them, from the scores and the group ids alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ZERO_ADV_RATIO = "critic/advantages/zero_adv_ratio"  # verl PR #5770's name


def _groups(scores: Sequence[float], index: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The scores as floats, each row's group number, and each group's size."""
    values = np.asarray(scores, dtype=np.float64).ravel()
    ids = np.asarray(index).ravel()
    if values.shape != ids.shape:
        raise ValueError(f"one group id per score: {values.size} scores, {ids.size} ids")
    _, group = np.unique(ids, return_inverse=True)
    return values, group, np.bincount(group)


def zero_adv_ratio(scores: Sequence[float], index: Sequence[int], atol: float = 0.0) -> float:
    """The share of responses whose GRPO advantage is 0 (verl PR #5770's `critic/advantages/zero_adv_ratio`).

    A response's advantage is 0 when its score equals its group's mean (within `atol`); a group of one has mean 0 in
    verl (`core_algos.compute_grpo_outcome_advantage`), so its response counts when its score is 0. With 0/1 rewards
    and equal groups this is the share of groups whose rewards are all equal (TRL's `frac_reward_zero_std`).

    Args:
        scores: `(bs,)` each response's score (its token-level rewards summed).
        index: `(bs,)` its prompt's group id (verl's `uid`).

    Returns:
        The share in [0, 1]; NaN for an empty batch.
    """
    values, group, count = _groups(scores, index)
    if values.size == 0:
        return float("nan")
    mean = np.bincount(group, weights=values) / count
    row_mean = np.where(count[group] == 1, 0.0, mean[group])
    return float(np.mean(np.abs(values - row_mean) <= atol))


def zero_std_group_ratio(scores: Sequence[float], index: Sequence[int], atol: float = 0.0) -> float:
    """The share of groups whose scores are all equal (TRL's `frac_reward_zero_std`; the playground's
    `train/zero_adv_group_ratio`). NaN for an empty batch."""
    values, group, count = _groups(scores, index)
    if values.size == 0:
        return float("nan")
    top = np.full(count.size, -np.inf)
    low = np.full(count.size, np.inf)
    np.maximum.at(top, group, values)
    np.minimum.at(low, group, values)
    return float(np.mean(top - low <= atol))
