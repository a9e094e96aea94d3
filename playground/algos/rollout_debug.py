"""verl's rollout-vs-trainer probes: `training/rollout_probs_diff_*` and the trajectories' staleness.

`rollout_probs_diff` is verl's `verl/utils/debug/metrics.py::calculate_debug_metrics` (logged with
`actor_rollout_ref.rollout.calculate_log_probs=true`): on the valid response tokens, |p_actor - p_rollout| of the
sampled tokens' probabilities (exp of the log-probs, not the log-probs), its max, mean and std (torch's unbiased
std, as verl), and the Pearson correlation of the two probabilities (arXiv 2506.13585). verl's FAQ: a mean below
0.005 is normal, above 0.01 an inference precision problem.

`trajectory_staleness` is verl's V1 `trainer_base.py::_compute_metrics` (PR #6736): how many model versions each
trajectory lags the policy being trained, `(global_steps - 1) - version`.

Each function takes one agent's rows `(rows, T)`; `per_agent` runs it over the `(K, rows, T)` batch.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from playground.metric_names import ROLLOUT_ACTOR_PROBS_PEARSON, ROLLOUT_PROBS_DIFF, TRAJECTORY_STALENESS


def pearson_corr(x: Tensor, y: Tensor, mask: Tensor) -> Tensor:
    """verl's `pearson_correlation_coefficient`: `torch.corrcoef` of the masked values, a 0-dim tensor (nan when
    either side is constant, as torch gives)."""
    return torch.corrcoef(torch.stack([x[mask], y[mask]]))[0, 1]


def rollout_probs_diff(actor_log_probs: Tensor, rollout_log_probs: Tensor, response_mask: Tensor) -> dict[str, Tensor]:
    """One agent's `training/rollout_probs_diff_{valid,max,mean,std}` and `training/rollout_actor_probs_pearson_corr`
    (0-dim tensors), from `(rows, T)` log-probs and mask. No valid token: valid 0 and the rest nan, as verl."""
    mask = response_mask.bool()
    if not bool(mask.any()):
        nan = torch.full((), float("nan"), device=mask.device)
        return {f"{ROLLOUT_PROBS_DIFF}_valid": torch.zeros((), device=mask.device), f"{ROLLOUT_PROBS_DIFF}_max": nan,
                f"{ROLLOUT_PROBS_DIFF}_mean": nan, f"{ROLLOUT_PROBS_DIFF}_std": nan, ROLLOUT_ACTOR_PROBS_PEARSON: nan}
    actor_probs, rollout_probs = actor_log_probs.float().exp(), rollout_log_probs.float().exp()
    diff = (actor_probs - rollout_probs).abs()[mask]
    return {f"{ROLLOUT_PROBS_DIFF}_valid": torch.ones((), device=mask.device), f"{ROLLOUT_PROBS_DIFF}_max": diff.max(),
            f"{ROLLOUT_PROBS_DIFF}_mean": diff.mean(), f"{ROLLOUT_PROBS_DIFF}_std": diff.std(),
            ROLLOUT_ACTOR_PROBS_PEARSON: pearson_corr(actor_probs, rollout_probs, mask)}


def trajectory_staleness(versions_behind: Tensor) -> dict[str, Tensor]:
    """One agent's `training/off_policy/trajectory_staleness/{mean,max,min}` from each row's lag `(rows,)`."""
    lag = versions_behind.float()
    return {f"{TRAJECTORY_STALENESS}/mean": lag.mean(), f"{TRAJECTORY_STALENESS}/max": lag.max(),
            f"{TRAJECTORY_STALENESS}/min": lag.min()}


def per_agent(fn: Callable[..., dict[str, Tensor]], *tensors: Tensor) -> dict[str, list[Tensor]]:
    """`fn` over each agent's rows of `(K, rows, ...)` tensors, as the step's metrics: name -> [`(K,)`]."""
    results = [fn(*(t[k] for t in tensors)) for k in range(tensors[0].shape[0])]
    return {key: [torch.stack([r[key] for r in results])] for key in results[0]}
