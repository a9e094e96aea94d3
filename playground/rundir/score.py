"""A run's score: one definition, read by the diagnosis, the Hydra sweeper's objective, the workshop's bar and the
explorer's sweep map.

The score is the last finite value of the run's *score metric*: the metric its task measures `task.score_target`
on, which `run.json` declares (`score_metric`: `critic/score/mean` for gym tasks, `val/accuracy` for token tasks).
A log that declares none (an external log, an older run) falls back to what such a run's target is read on: greedy
validation (`val/score`) for a token task or when no training score is logged, else `critic/score/mean`.

The last value, not a tail mean: a run stopped on reaching its target (`trainer.stop_on_score`) stops at the record
that reached it, so its score is the value the trainer judged.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from playground.metric_names import SCORE_MEAN, VAL_SCORE


def score_metric(facts: Mapping[str, Any] | None, columns: Collection[str]) -> str:
    """The metric a run's score is read on.

    Args:
        facts: the run's `run.json` (or the diagnosis's facts): `score_metric` and `family` are read.
        columns: the metrics the run logged.
    """
    facts = facts or {}
    declared = facts.get("score_metric")
    if declared and declared in columns:
        return declared
    if facts.get("family") == "token" or SCORE_MEAN not in columns:
        return VAL_SCORE  # token tasks: greedy validation; sampled train reward stays far below it
    return SCORE_MEAN


def last_finite(values: Iterable[float | None]) -> float | None:
    """The last finite value of a series (None and NaN are gaps); None when there is none."""
    last = None
    for value in values:
        if value is not None and math.isfinite(value):
            last = float(value)
    return last


def final_score(columns: Mapping[str, Iterable[float | None]], facts: Mapping[str, Any] | None) -> float | None:
    """A run's score from its metrics as columns (a dict of series, or a pandas frame); None before it has one."""
    metric = score_metric(facts, columns)
    return last_finite(columns[metric]) if metric in columns else None


def records_score(records: Sequence[Mapping[str, float]], facts: Mapping[str, Any] | None) -> float | None:
    """`final_score` of a run's metric records (one dict a step, as `metrics.jsonl` holds them)."""
    names = {key for record in records for key in record}
    metric = score_metric(facts, names)
    return last_finite(record.get(metric) for record in records)


def run_score(run_dir: str | Path) -> float | None:
    """`final_score` of a run dir, from its `run.json` and `metrics.jsonl`."""
    from playground.rundir.runs import METRICS, read_metrics_jsonl, read_run_info

    run_dir = Path(run_dir)
    return records_score(read_metrics_jsonl(run_dir / METRICS).records, read_run_info(run_dir))
