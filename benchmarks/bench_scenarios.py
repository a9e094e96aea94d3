"""Seconds from start to each scenario's signature: one JSON line per (task, scenario) with the training wall time
until the finding's first step and the wall time of the whole `trainer.stop_on_finding=<id>` run (budget 20 s on gym
tasks, 30 s on token tasks with the SFT base cached: bases are built before the clock starts).

    python -m benchmarks.bench_scenarios [--seeds 1 2 3] [--tasks cartpole reverse]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.common import QUIET, emit, seconds_until

TASKS = ("cartpole", "acrobot", "pendulum", "mountaincar", "reverse", "addition")
BUDGET_S = {"gym": 20.0, "token": 30.0}


def scenarios(task: str) -> list[str]:
    from playground.config import scenarios_of

    return [sid for sid in scenarios_of(task) if sid != "healthy"]


def time_to_signature(task: str, sid: str, seed: int) -> dict:
    """Run the scenario until its finding appears (a crash: until the trainer stops it as diverged)."""
    from playground.config import compose
    from playground.diagnose.sources import diagnose_run_dir
    from playground.rundir.runs import read_metrics_jsonl, read_run_info
    from playground.train import build_trainer, prepare

    overrides = [*QUIET, f"task={task}", f"scenario={sid}", f"trainer.seed={seed}"]
    if sid != "training_crash":
        overrides.append(f"trainer.stop_on_finding={sid}")
    cfg = compose(overrides)
    if cfg.task.family == "token":  # build (or load) the SFT base first: the timing starts from a cached base
        from playground.run_spec import resolve_base
        from playground.tasks.base_build import base_model_for

        base_model_for(resolve_base(cfg))
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        build_trainer([cfg], [Path(tmp)], prepare(cfg)).fit()
        wall = time.perf_counter() - start
        diagnosis = diagnose_run_dir(tmp, config=cfg, write=False)
        records = read_metrics_jsonl(Path(tmp) / "metrics.jsonl").records
        status = read_run_info(tmp)["status"]
    finding = next((f for f in diagnosis.findings if f.id == sid), None)
    first = finding.first_step if finding else None
    return {"first_step": first, "to_signature_s": round(seconds_until(records, first), 2) if first else None,
            "wall_s": round(wall, 2), "status": status, "steps": diagnosis.steps, "family": cfg.task.family}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    args = parser.parse_args()
    torch.set_num_threads(1)
    for task in args.tasks:
        for sid in scenarios(task):
            for seed in args.seeds:
                r = time_to_signature(task, sid, seed)
                budget = BUDGET_S[r["family"]]
                emit("scenario_seconds_to_signature", r["to_signature_s"], "s", task=task, scenario=sid, seed=seed,
                     first_step=r["first_step"], wall_s=r["wall_s"], status=r["status"],
                     within_budget=(r["first_step"] is not None or r["status"] == "oom") and r["wall_s"] <= budget,
                     budget_s=budget)


if __name__ == "__main__":
    main()
