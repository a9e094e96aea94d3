"""The scenario matrix: every task × scenario on a fixed panel of seeds, and what the diagnosis makes of each run.

`python -m benchmarks.scenario_matrix` trains every scenario of every task (`config.scenarios_of`) on the panel's seeds,
one Hydra multirun per task × scenario through the batched launcher (`hydra/launcher=batched`: a task's seeds train
as one batch of agents where they can), two multiruns at a time, and prints one JSON line per task × scenario:

- `root`: on how many seeds the scenario's id is the root of a diagnosis (healthy: runs with no warning at all)
- `appears`: on how many seeds the id is found at all
- `extra`: warnings outside the scenario's own diagnosis, id -> on how many seeds
- `seconds_to_signature`: the median training seconds (timing_s/step summed) up to the id's first step
- `replay`: on how many seeds the run, read back as verl console lines (its metrics.jsonl through the console
  sink's format, its error last as a console shows it) and diagnosed as an external log, replays
  (`playground.diagnose.replay`) to its own task and scenario

then one line with the total wall time. The panel (seeds 101-110) was used for no scenario's tuning; `--seeds 1-10`
is the development panel. `--tasks` and `--scenarios` pick a part; `--out` keeps every run dir.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from playground.config import known_options, scenarios_of
from playground.diagnose.readers import parse_verl_text
from playground.diagnose.replay import replay_read
from playground.diagnose.sources import diagnose_read
from playground.metrics import STEP
from playground.rundir.runs import find_runs, read_findings, read_metrics_jsonl, read_run_info
from playground.rundir.sinks import format_console_line

ROOT = Path(__file__).resolve().parents[1]
PANEL = tuple(range(101, 111))
BAD = ("warning", "critical")


def seeds_arg(text: str) -> tuple[int, ...]:
    """`101-110` or `1,5,9`."""
    if "-" in text:
        lo, hi = (int(x) for x in text.split("-"))
        return tuple(range(lo, hi + 1))
    return tuple(int(x) for x in text.split(","))


def cells(tasks: list[str] | None, scenarios: list[str] | None) -> list[tuple[str, str]]:
    out = []
    for task in tasks or known_options("task"):
        for scenario in scenarios_of(task):
            if scenarios is None or scenario in scenarios:
                out.append((task, scenario))
    return out


def train_cell(task: str, scenario: str, seeds: tuple[int, ...], sweep_dir: Path, extra: list[str]) -> float:
    """One multirun over the seeds (with `extra` overrides, for trying a scenario's knobs); returns its wall seconds."""
    args = [sys.executable, "-m", "playground.train", "-m", "hydra/launcher=batched", "hydra.launcher.num_threads=1",
            f"task={task}", f"scenario={scenario}", f"trainer.seed={','.join(map(str, seeds))}",
            "trainer.logger=[]", "trainer.progress_bar=false", f"hydra.sweep.dir={sweep_dir}", *extra]
    start = time.perf_counter()
    done = subprocess.run(args, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True)
    if done.returncode:
        print(f"# {task}/{scenario}: the multirun failed: {done.stderr[-600:]}", file=sys.stderr, flush=True)
    return time.perf_counter() - start


def console_text(run_dir: Path) -> str:
    """The run as verl's console would have shown it: a `step:N - key:value` line per step, then the error it
    stopped on (an out-of-memory or any other exception) as the last line of a traceback."""
    records = read_metrics_jsonl(run_dir / "metrics.jsonl").records
    lines = [format_console_line(r, int(r[STEP])) for r in records]
    info = read_run_info(run_dir) or {}
    if info.get("status") in ("oom", "failed") and info.get("error"):
        lines.append(str(info["error"]))
    return "\n".join(lines) + "\n"


def replays_to(run_dir: Path) -> tuple[str | None, str | None]:
    """(task, scenario) the run's console text replays to (None, None when it names none)."""
    read = parse_verl_text(console_text(run_dir), name=run_dir.name)
    try:
        found = replay_read(read, diagnose_read(read))
    except Exception as error:  # noqa: BLE001 - one run's replay failing must not lose the matrix's other figures
        print(f"# {run_dir}: the replay failed: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
        return None, f"failed ({type(error).__name__})"
    return found["task"], found["scenario"]


def judge_run(run_dir: Path, scenario: str) -> dict:
    """What one run's diagnosis says about its scenario."""
    report = read_findings(run_dir) or {}
    info = read_run_info(run_dir) or {}
    diagnoses = report.get("diagnoses", [])
    warnings = {f["id"] for f in report.get("findings", []) if f.get("severity") in BAD}
    own = next((d for d in diagnoses if d["root"]["id"] == scenario), None)
    mine = {scenario} | {c["id"] for c in own["consequences"]} if own else {scenario}
    first = next((f["first_step"] for f in report.get("findings", []) if f["id"] == scenario), None)
    seconds = None
    if first is not None:
        records = read_metrics_jsonl(run_dir / "metrics.jsonl").records
        seconds = sum(r.get("timing_s/step", 0.0) for r in records if 0 < r[STEP] <= first)
    root = not warnings if scenario == "healthy" else own is not None
    replayed = replays_to(run_dir) if (run_dir / "metrics.jsonl").is_file() else (None, None)
    return {"seed": info.get("seed"), "status": info.get("status"), "root": root, "appears": first is not None,
            "replay": replayed == (info.get("task"), scenario), "replayed": "/".join(map(str, replayed)),
            "extra": sorted(warnings - mine), "seconds": seconds,
            "roots": [d["root"]["id"] for d in diagnoses if d["root"].get("severity") in BAD]}


def judge_cell(task: str, scenario: str, sweep_dir: Path, wall: float) -> dict:
    runs = [judge_run(run, scenario) for run in find_runs([sweep_dir])]
    extra: dict[str, int] = {}
    for run in runs:
        for fid in run["extra"]:
            extra[fid] = extra.get(fid, 0) + 1
    seconds = [r["seconds"] for r in runs if r["seconds"] is not None]
    return {"task": task, "scenario": scenario, "seeds": len(runs), "root": sum(r["root"] for r in runs),
            "appears": sum(r["appears"] for r in runs), "replay": sum(r["replay"] for r in runs), "extra": extra,
            "seconds_to_signature": round(statistics.median(seconds), 2) if seconds else None,
            "wall_s": round(wall, 1), "misses": [{"seed": r["seed"], "roots": r["roots"], "status": r["status"]}
                                                 for r in runs if not r["root"]],
            "replay_misses": [{"seed": r["seed"], "replayed": r["replayed"]} for r in runs if not r["replay"]]}


def meets_bar(result: dict) -> bool:
    """A failure's id is the root on 9 of 10 seeds; a healthy run has no warning on every seed."""
    if result["scenario"] == "healthy":
        return result["root"] == result["seeds"]
    return result["root"] >= 0.9 * result["seeds"]


def replay_meets_bar(result: dict) -> bool:
    """The run replays to its own task and scenario from its console log on 9 of 10 seeds."""
    return result.get("replay", 0) >= 0.9 * result["seeds"]


def markdown(results: list[dict], wall: float) -> str:
    """The matrix as a table (root, appears, replay, extra warnings, seconds to the signature)."""
    lines = ["| task | scenario | root | appears | replay | extra warnings outside its diagnosis | s to signature |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        extra = ", ".join(f"{fid} {n}" for fid, n in sorted(r["extra"].items(), key=lambda x: -x[1])) or "–"
        seconds = "–" if r["seconds_to_signature"] is None else f"{r['seconds_to_signature']:.1f}"
        mark = "" if meets_bar(r) else " ✗"
        replay_mark = "" if replay_meets_bar(r) else " ✗"
        lines.append(f"| {r['task']} | {r['scenario']} | {r['root']}/{r['seeds']}{mark} | {r['appears']}/{r['seeds']} "
                     f"| {r.get('replay', 0)}/{r['seeds']}{replay_mark} | {extra} | {seconds} |")
    lines.append(f"\n{sum(meets_bar(r) for r in results)} of {len(results)} cells meet the bar; "
                 f"{sum(map(replay_meets_bar, results))} of {len(results)} replay to themselves on 9/10 seeds; "
                 f"{wall / 60:.1f} min of wall time.")
    return "\n".join(lines) + "\n"


def add_cell_args(parser: argparse.ArgumentParser, jobs: int) -> None:
    """The options every cell benchmark takes: which seeds, tasks and scenarios, how many at a time, where to keep the
    run dirs and the Markdown table."""
    parser.add_argument("--seeds", type=seeds_arg, default=PANEL, help="e.g. 101-110 (the panel) or 1,2,3")
    parser.add_argument("--tasks", type=lambda t: t.split(","), default=None)
    parser.add_argument("--scenarios", type=lambda t: t.split(","), default=None)
    parser.add_argument("--jobs", type=int, default=jobs, help="multiruns at a time (each trains on one thread)")
    parser.add_argument("--out", type=Path, default=None, help="keep the run dirs here")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the table as Markdown here")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scenario_matrix", description=__doc__.splitlines()[0])
    add_cell_args(parser, jobs=2)
    parser.add_argument("--override", action="append", default=[], help="an extra override for every cell (tuning)")
    args = parser.parse_args(argv)
    results, wall = run_matrix(args.seeds, cells(args.tasks, args.scenarios), jobs=args.jobs, out=args.out,
                               extra=args.override)
    if args.markdown:
        args.markdown.write_text(markdown(results, wall))
    print(json.dumps({"figure": "scenario_matrix", "cells": len(results), "meet_the_bar": sum(map(meets_bar, results)),
                      "replay_to_themselves": sum(map(replay_meets_bar, results)),
                      "seeds": len(args.seeds), "wall_s": round(wall, 1)}), flush=True)
    return 0


def run_cells(todo: list[tuple[str, str]], one_cell: Callable[[str, str, Path], dict], *, jobs: int,
              out: Path | None) -> tuple[list[dict], float]:
    """Train and judge every cell with `one_cell(task, scenario, base_dir)` (a JSON line each as it ends), `jobs` at a
    time, under `out` (else a temporary dir); returns the results and the wall seconds."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        base = out or Path(tmp)

        def one(cell: tuple[str, str]) -> dict:
            result = one_cell(*cell, base)
            print(json.dumps(result), flush=True)
            return result

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            results = list(pool.map(one, todo))
    return results, time.perf_counter() - start


def run_matrix(seeds: tuple[int, ...], todo: list[tuple[str, str]], *, jobs: int = 2, out: Path | None = None,
               extra: list[str] | None = None) -> tuple[list[dict], float]:
    """Train and judge every cell (a JSON line each as it ends); returns the results and the wall seconds."""

    def one(task: str, scenario: str, base: Path) -> dict:
        sweep = base / f"{task}_{scenario}"
        return judge_cell(task, scenario, sweep, train_cell(task, scenario, seeds, sweep, extra or []))

    return run_cells(todo, one, jobs=jobs, out=out)


if __name__ == "__main__":
    raise SystemExit(main())
