"""DAPO's data-side pieces as pure functions (Yu et al. 2025, "DAPO: An Open-Source LLM Reinforcement Learning
System at Scale", arXiv 2503.14476): dynamic sampling's group filter and the soft overlong punishment.

In verl they live outside `core_algos.py`: the filter inline in the DAPO recipe's trainer loop
(`dapo/dapo_ray_trainer.py` in verl-recipe, `algorithm.filter_groups.{enable,metric,max_num_gen_batches}`), the
penalty in the DAPO reward manager (`verl/workers/reward_manager/dapo.py`, `overlong_buffer_cfg.{enable,len,
penalty_factor,log}` with `max_resp_len`; the docs spell it `reward_model.overlong_buffer.*`). DAPO's other
parts are loss settings: clip-higher is `clip_ratio_low=0.2, clip_ratio_high=0.28` on the vanilla loss and
token-level averaging is `loss_agg_mode=token-mean`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import torch
from torch import Tensor


class GroupFilter(NamedTuple):
    """Which groups dynamic sampling keeps.

    groups: `(G_kept,)` the kept group ids, in order of first appearance (as verl's `kept_prompt_uids`).
    rows: `(bs,)` bool, the rows of kept groups (verl's `kept_traj_idxs`, as a mask; row order is kept).
    """

    groups: Tensor
    rows: Tensor


def filter_metric_values(metric: str, batch: Mapping[str, Any]) -> Tensor:
    """The per-row values `algorithm.filter_groups.metric` names, as the recipe builds them.

    `seq_final_reward`: `token_level_rewards.sum(-1)` (after any in-reward KL penalty); `seq_reward`:
    `token_level_scores.sum(-1)`; any other name (`acc`, `score`, ...) is a per-row field of the reward
    manager's extra info, looked up in `batch` as it is. With the DAPO reward manager `acc` is the score
    before the overlong penalty, `seq_reward` the score after it.
    """
    if metric == "seq_final_reward":
        return batch["token_level_rewards"].sum(dim=-1)
    if metric == "seq_reward":
        return batch["token_level_scores"].sum(dim=-1)
    if metric not in batch:
        raise KeyError(f"algorithm.filter_groups.metric={metric!r} is not in the batch; it has {sorted(batch)}")
    return batch[metric]


def filter_groups(seq_scores: Tensor, index: Tensor) -> GroupFilter:
    """DAPO's dynamic sampling filter (verl-recipe `dapo_ray_trainer.py`, `algorithm.filter_groups.enable`).

    A group (the responses to one prompt, sharing `index` like verl's `uid`) is kept when its scores are not
    all equal, so its GRPO advantages are not all 0; a group of one response is kept too (as verl). The caller
    keeps generating until enough groups are kept (`max_num_gen_batches`), then truncates to
    `train_batch_size · rollout.n` rows.

    verl tests `np.std(values) > 0`; this tests `max > min`. They agree on exact values such as `acc` in {0, 1},
    but `np.std` of equal non-representable floats can round to a tiny positive number (`np.std([0.1] * 3)` is
    1.4e-17), so verl keeps such a group and this drops it.

    Args:
        seq_scores: `(bs,)` the metric per row (see `filter_metric_values`).
        index: `(bs,)` int64 group id per row.
    """
    if seq_scores.dim() != 1 or index.shape != seq_scores.shape:
        raise ValueError(f"seq_scores and index must both be (bs,), got {tuple(seq_scores.shape)} and "
                         f"{tuple(index.shape)}")
    uids, group = torch.unique(index, return_inverse=True)
    n_groups, rows = len(uids), len(index)
    count = torch.bincount(group, minlength=n_groups)
    high = seq_scores.new_full((n_groups,), -torch.inf).scatter_reduce(0, group, seq_scores, "amax")
    low = seq_scores.new_full((n_groups,), torch.inf).scatter_reduce(0, group, seq_scores, "amin")
    keep = (count == 1) | (high > low)
    positions = torch.arange(rows, device=index.device)
    first_row = torch.full((n_groups,), rows, device=index.device).scatter_reduce(0, group, positions, "amin")
    order = torch.argsort(first_row)
    return GroupFilter(groups=uids[order][keep[order]], rows=keep[group])


def overlong_penalty(
    response_length: Tensor,
    max_response_length: int,
    buffer_len: int | float | Tensor,
    penalty_factor: float | Tensor,
    enable: bool = True,
) -> Tensor:
    """DAPO's soft overlong punishment, as verl's `DAPORewardManager` adds it to each response's score.

    `penalty = min(−(L − (L_max − L_buf)) / L_buf · penalty_factor, 0)`: 0 up to `L_max − L_buf` tokens, then
    linear down to `−penalty_factor` at `L_max`. verl adds it to the score on the last valid token (the
    `acc` it logs is the score without it).

    Args:
        response_length: `(bs,)` or `(K, bs)` valid response tokens per row.
        max_response_length: `L_max` (`data.max_response_length`, verl's `max_resp_len`).
        buffer_len: `L_buf` (`overlong_buffer.len`), > 0 and ≤ `L_max`; a float or `(K, 1)` tensor.
        penalty_factor: `overlong_buffer.penalty_factor`; a float or `(K, 1)` tensor.
        enable: `overlong_buffer.enable`; False gives zeros.

    Returns:
        `(bs,)` (or `(K, bs)`) penalties, ≤ 0.
    """
    length = response_length if response_length.is_floating_point() else response_length.to(torch.float32)
    if not enable:
        return torch.zeros_like(length)
    if not isinstance(buffer_len, Tensor):
        if not buffer_len > 0:
            raise ValueError(f"overlong_buffer.len must be > 0 when enabled, got {buffer_len}")
        if max_response_length < buffer_len:
            raise ValueError(f"max_response_length ({max_response_length}) must be >= overlong_buffer.len "
                             f"({buffer_len})")
    exceed = length - (max_response_length - buffer_len)
    return torch.clamp(-exceed / buffer_len * penalty_factor, max=0.0)
