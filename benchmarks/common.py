"""Shared bits of the benchmarks: train a config in-process and time it, print one JSON line per figure."""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

from playground.metrics import STEP
from playground.rundir.runs import read_metrics_jsonl

QUIET = ["trainer.logger=[]", "trainer.progress_bar=false"]


def emit(figure: str, value, unit: str, **extra) -> None:
    """One benchmark figure as one JSON line."""
    print(json.dumps({"figure": figure, "value": value, "unit": unit, **extra}), flush=True)


def fit_timed(cfg) -> tuple[list[dict], float, float, object]:
    """Train a composed config in this process (into a temporary run dir); returns the metric records, the wall
    and process-CPU seconds of `fit`, and the trainer."""
    from playground.train import build_trainer, prepare

    with tempfile.TemporaryDirectory() as tmp:
        trainer = build_trainer([cfg], [Path(tmp)], prepare(cfg))
        start, cpu = time.perf_counter(), time.process_time()
        trainer.fit()
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        records = read_metrics_jsonl(Path(tmp) / "metrics.jsonl").records
    return records, wall, cpu, trainer


def train(overrides: list[str]) -> tuple[list[dict], float, object]:
    """Train in this process; returns the metric records, the wall seconds of `fit`, and the trainer."""
    from playground.config import compose

    torch.set_num_threads(1)
    records, wall, _, trainer = fit_timed(compose([*QUIET, *overrides]))
    return records, wall, trainer


def first_reaching(records: list[dict], key: str, target: float) -> dict | None:
    return next((r for r in records if r.get(key, -float("inf")) >= target), None)


def seconds_until(records: list[dict], step: float) -> float:
    """Training wall time up to and including `step`: the sum of `timing_s/step` (testing excluded)."""
    return sum(r.get("timing_s/step", 0.0) for r in records if 0 < r[STEP] <= step)


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None
