"""Held-out tasks: each rule's thresholds fitted on some tasks' runs and scored on another task's (issue 50, item 4).

    python -m benchmarks.heldout_split [--runs DIR ...] [--markdown PATH]

The runs are scenario run dirs (`python -m benchmarks.scenario_matrix --out DIR`: `<task>_<scenario>/<k>/`, or the
onset matrix's `<task>_<scenario>_onset<N>/<k>/`); each run.json names its task, family, scenario and seed. Every
run is diagnosed once as shipped, then again for each threshold of each rule that applies to its family, with that
one threshold scaled by a factor of `GRID` (`engine.diagnose_log`'s `overrides`; the others stay as shipped).

A judgement is one run seen by one rule's id: right on a run of that id's scenario when the id is the root of a
diagnosis; right on any other run (healthy, or another scenario) when the id is no warning there outside the
scenario's own diagnosis (a consequence the scenario's root explains is no false alarm), as benchmarks.scenario_matrix
judges `extra` warnings.

For each threshold and fold, the factor with the most right judgements on the fold's training runs is fitted (ties
go to the shipped value, then to the factor nearest 1) and the fold's held-out runs are scored with it and with the
shipped value. Folds: each task held out (fitted on the other tasks), each family held out (gym vs token), and each
seed held out (fitted on the other seeds of every task: the in-seed split that the held-out-task split is compared
with, as DynFault compares held-out seeds with held-out programs).

Prints a JSON line per threshold and one with the overall accuracies; `--markdown` writes the table.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.diagnosis_panel import BENCH_RUNS
from playground.diagnose import catalogue
from playground.diagnose.calibration import FAMILIES, resolved_thresholds
from playground.diagnose.engine import Report, diagnose_log, evaluate, rules, run_log
from playground.diagnose.log import Log
from playground.diagnose.sources import read_config
from playground.rundir.runs import find_runs, read_metrics_jsonl, read_run_info

ROOT = Path(__file__).resolve().parents[1]
GRID = (0.25, 0.5, 0.7, 1.0, 1.4, 2.0, 4.0)  # factors on a threshold's shipped value
SHIPPED = 1.0
BAD = ("warning", "critical")
TASK_DEPENDENT = 4.0  # fitted factors across held-out-task folds this far apart (two grid steps or more)


@dataclass(frozen=True)
class Verdict:
    """What one diagnosis says that a judgement reads: the roots, and the warnings outside the scenario's own."""

    roots: frozenset[str]
    stray: frozenset[str]  # warnings that are not the scenario's root or one of its consequences


@dataclass
class Run:
    task: str
    family: str
    scenario: str
    seed: int
    path: str
    log: Log | None = None
    config: dict | None = None
    notes: list[str] = field(default_factory=list)
    shipped: Verdict | None = None


@dataclass(frozen=True)
class Unit:
    """One threshold of one rule: what is fitted."""

    rule: str
    threshold: str
    id: str
    families: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.rule}.{self.threshold}"


def verdict(report: Report, scenario: str) -> Verdict:
    own = next((d for d in report.diagnoses if d.root.id == scenario), None)
    mine = {scenario} | ({c.id for c in own.consequences} if own else set())
    warnings = {f.id for f in report.findings if f.severity in BAD}
    return Verdict(frozenset(report.roots()), frozenset(warnings - mine))


def right(v: Verdict, fid: str, scenario: str) -> bool:
    """Whether a run's diagnosis is right about `fid`: its root on a run of that scenario, else no stray warning."""
    return fid in v.roots if scenario == fid else fid not in v.stray


def load_runs(dirs: Iterable[Path]) -> list[Run]:
    """Every finished or failed run under `dirs` with its run.json, diagnosed as shipped."""
    out = []
    for run_dir in find_runs(list(dirs)):
        info = read_run_info(run_dir) or {}
        if not {"task", "family", "scenario", "seed"} <= set(info):
            raise ValueError(f"{run_dir}/run.json lacks task, family, scenario or seed: not a scenario run")
        records = read_metrics_jsonl(run_dir / "metrics.jsonl").records if (run_dir / "metrics.jsonl").is_file() else []
        log, config, notes = run_log(records, info=info, config=read_config(run_dir))
        run = Run(info["task"], log.facts["family"], info["scenario"], int(info["seed"]), str(run_dir), log, config,
                  notes)
        run.shipped = verdict(diagnose_log(log, run.family, config, notes=notes), run.scenario)
        out.append(run)
    if not out:
        raise ValueError(f"no run dirs under {', '.join(map(str, dirs))}: train them with "
                         "`python -m benchmarks.scenario_matrix --out DIR`")
    return out


def units(families: Iterable[str]) -> list[Unit]:
    """Every nonzero numeric threshold of every rule that applies to one of `families` (a zero scales to itself)."""
    present = set(families)
    out = []
    for spec in catalogue.document()["rules"]:
        applies = tuple(f for f in spec.get("families", FAMILIES) if f in present)
        for name, value in (spec.get("thresholds") or {}).items():
            if applies and float(value) != 0:
                out.append(Unit(spec["name"], name, spec["id"], applies))
    return out


def shipped_value(unit: Unit, family: str) -> float:
    spec = next(s for s in catalogue.document()["rules"] if s["name"] == unit.rule)
    return resolved_thresholds(spec, family)[unit.threshold][0]


def judge_grid(unit: Unit, runs: list[Run]) -> dict[str, dict[float, bool]]:
    """Per run (path) the rule applies to: factor -> whether the run is judged right with the threshold so scaled.

    A factor under which the rule fires on the same windows as shipped leaves the diagnosis as shipped; only the
    others are diagnosed again, once per distinct set of windows."""
    out: dict[str, dict[float, bool]] = {}
    for family in unit.families:
        base = shipped_value(unit, family)
        shipped_rule = next(r for r in rules(family) if r.name == unit.rule)
        mine = [r for r in runs if r.family == family]
        as_shipped = {r.path: evaluate(shipped_rule, r.log)[0] for r in mine if r.log is not None}
        for factor in GRID:
            overrides = ((unit.rule, unit.threshold, base * factor),)
            scaled = next(r for r in rules(family, overrides) if r.name == unit.rule)
            for run in mine:
                assert run.log is not None and run.shipped is not None
                v = run.shipped
                if factor != SHIPPED and evaluate(scaled, run.log)[0] != as_shipped[run.path]:
                    v = verdict(diagnose_log(run.log, family, run.config, notes=run.notes, overrides=overrides),
                                run.scenario)
                out.setdefault(run.path, {})[factor] = right(v, unit.id, run.scenario)
        for run in runs:
            if run.log is not None:
                run.log.memo.clear()  # the scaled conditions' memo would only grow
    return out


def fit(grid: dict[str, dict[float, bool]], train: list[str]) -> float:
    """The factor with the most right judgements on `train`; ties to the shipped value, then to the nearest to 1."""
    return max(GRID, key=lambda f: (sum(grid[p][f] for p in train), f == SHIPPED, -abs(math.log(f)), -f))


def folds(runs: list[Run]) -> list[tuple[str, str, list[Run]]]:
    """(kind, name, the held-out runs): each task, each family, each seed held out."""
    out = []
    for kind, of in (("task", lambda r: r.task), ("family", lambda r: r.family), ("seed", lambda r: str(r.seed))):
        for name in sorted({of(r) for r in runs}):
            out.append((kind, name, [r for r in runs if of(r) == name]))
    return out


def split_unit(unit: Unit, runs: list[Run], grid: dict[str, dict[float, bool]]) -> dict:
    """The unit's figures per fold and over each kind of fold."""
    judged = [r for r in runs if r.path in grid]
    per_fold: list[dict[str, Any]] = []
    totals: dict[str, dict[str, int]] = {}
    for kind, name, held in folds(judged):
        test = [r.path for r in held]
        train = [r.path for r in judged if r.path not in set(test)]
        if not test or not train:
            continue
        factor = fit(grid, train)
        right_fitted = sum(grid[p][factor] for p in test)
        in_fold = round(sum(grid[p][factor] for p in train) / len(train), 4)
        row: dict[str, Any] = {
            "kind": kind, "fold": name, "factor": factor,
            "value": {f: round(shipped_value(unit, f) * factor, 12) for f in sorted({r.family for r in held})},
            "held_out": len(test), "right_fitted": right_fitted, "right_shipped": sum(grid[p][SHIPPED] for p in test),
            "in_fold": in_fold, "drop": round(in_fold - right_fitted / len(test), 4)}
        per_fold.append(row)
        total = totals.setdefault(kind, {"held_out": 0, "right_fitted": 0, "right_shipped": 0})
        for key in total:
            total[key] += row[key]
    task_factors = [f["factor"] for f in per_fold if f["kind"] == "task"]
    flat = all(len(set(by.values())) == 1 for by in grid.values())
    return {"rule": unit.rule, "threshold": unit.threshold, "id": unit.id, "families": list(unit.families),
            "shipped": {f: shipped_value(unit, f) for f in unit.families}, "runs": len(judged),
            "positives": sum(r.scenario == unit.id for r in judged), "flat": flat,
            "task_dependent": bool(task_factors) and max(task_factors) / min(task_factors) >= TASK_DEPENDENT,
            "folds": per_fold, "totals": totals}


def overall(results: list[dict]) -> dict:
    """Pooled over every threshold's held-out runs, per kind of fold: right with the fitted and the shipped value
    (`flat` thresholds, which no factor moves, count right or wrong alike whatever is fitted)."""
    out: dict[str, dict] = {}
    for result in results:
        for kind, total in result["totals"].items():
            pooled = out.setdefault(kind, {"held_out": 0, "right_fitted": 0, "right_shipped": 0, "in_fold": 0.0})
            for key in ("held_out", "right_fitted", "right_shipped"):
                pooled[key] += total[key]
        for row in result["folds"]:
            out[row["kind"]]["in_fold"] += row["in_fold"] * row["held_out"]
    for pooled in out.values():
        n = pooled["held_out"] or 1
        pooled.update(in_fold=round(pooled["in_fold"] / n, 4), fitted=round(pooled["right_fitted"] / n, 4),
                      shipped=round(pooled["right_shipped"] / n, 4))
        pooled["drop"] = round(pooled["in_fold"] - pooled["fitted"], 4)
    return out


def reading(result: dict) -> str:
    """What the split says about one threshold, in a sentence."""
    tasks = {f["fold"]: f["factor"] for f in result["folds"] if f["kind"] == "task"}
    if result["flat"]:
        return "no factor changes a judgement on these runs: the split says nothing of it"
    moved = {t: f for t, f in tasks.items() if f != SHIPPED}
    if result["task_dependent"]:
        spread = ", ".join(f"×{f:g} without {t}" for t, f in sorted(tasks.items(), key=lambda x: x[1]))
        return f"task-dependent: the fitted factor moves with the task left out ({spread})"
    if not moved:
        return "the shipped value is fitted on every held-out-task fold: the other factors lose judgements"
    if len(moved) == len(tasks) and len(set(moved.values())) == 1:
        return f"stable: ×{next(iter(moved.values())):g} is fitted on every held-out-task fold"
    return "stable: " + ", ".join(f"×{f:g} without {t}" for t, f in sorted(moved.items())) + ", else as shipped"


def _fmt_share(right: int, n: int) -> str:
    return f"{right}/{n}" if n else "–"


def markdown(results: list[dict], pooled: dict, meta: dict) -> str:
    tasks = sorted({f["fold"] for r in results for f in r["folds"] if f["kind"] == "task"})
    families = sorted({f["fold"] for r in results for f in r["folds"] if f["kind"] == "family"})
    head = ["rule.threshold", "id", "shipped", "runs (its id)", *[f"×fit −{t}" for t in tasks],
            *[f"×fit −{f}" for f in families], "held-out task: fitted / shipped", "in-fold → held-out (drop)",
            "what the split says"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        by = {(f["kind"], f["fold"]): f for f in r["folds"]}
        shipped = ", ".join(f"{fam} {v:g}" for fam, v in r["shipped"].items())
        cells = [f"×{by[('task', t)]['factor']:g}" if ("task", t) in by else "–" for t in tasks]
        cells += [f"×{by[('family', f)]['factor']:g}" if ("family", f) in by else "–" for f in families]
        t = r["totals"].get("task", {"held_out": 0, "right_fitted": 0, "right_shipped": 0})
        task_rows = [f for f in r["folds"] if f["kind"] == "task"]
        n = t["held_out"]
        in_fold = sum(f["in_fold"] * f["held_out"] for f in task_rows) / n if n else 0.0
        held = t["right_fitted"] / n if n else 0.0
        scored = f"{_fmt_share(t['right_fitted'], n)} / {_fmt_share(t['right_shipped'], n)}"
        lines.append(f"| {r['rule']}.{r['threshold']} | {r['id']} | {shipped} | {r['runs']} ({r['positives']}) | "
                     + " | ".join(cells) + f" | {scored} | {in_fold:.3f} → {held:.3f} ({in_fold - held:+.3f}) | "
                     f"{reading(r)} |")
    lines.append("")
    lines.append("| thresholds | split | judgements held out | in-fold accuracy | held-out accuracy, fitted | "
                 "held-out, shipped | drop |")
    lines.append("|---|---|---|---|---|---|---|")
    names = {"seed": "held-out seed (in-seed)", "task": "held-out task", "family": "held-out family"}
    informative = sum(not r["flat"] for r in results)
    for which, label in (("all", f"all {len(results)}"), ("informative", f"the {informative} some factor moves")):
        for kind in ("seed", "task", "family"):
            if kind in pooled[which]:
                p = pooled[which][kind]
                lines.append(f"| {label} | {names[kind]} | {p['held_out']} | {p['in_fold']:.3f} | {p['fitted']:.3f} | "
                             f"{p['shipped']:.3f} | {p['drop']:+.3f} |")
    lines.append(f"\n{meta['runs']} runs ({meta['tasks']}; seeds {meta['seeds']}), {len(results)} thresholds, "
                 f"grid ×{{{', '.join(f'{g:g}' for g in GRID)}}}; {meta['wall_s']:.0f} s.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.heldout_split", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, action="append", default=None,
                        help=f"a dir of scenario run dirs (repeatable; default {BENCH_RUNS.relative_to(ROOT)})")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the table as Markdown here")
    args = parser.parse_args(argv)
    dirs = args.runs or [BENCH_RUNS]
    if missing := [str(d) for d in dirs if not d.is_dir()]:
        parser.error(f"no such dir: {', '.join(missing)} (train runs with "
                     "`python -m benchmarks.scenario_matrix --out DIR`)")
    start = time.perf_counter()
    runs = load_runs(dirs)
    results = []
    for unit in units({r.family for r in runs}):
        result = split_unit(unit, runs, judge_grid(unit, runs))
        results.append(result)
        print(json.dumps(result), flush=True)
    pooled = {"all": overall(results), "informative": overall([r for r in results if not r["flat"]])}
    wall = time.perf_counter() - start
    meta = {"runs": len(runs), "tasks": ", ".join(sorted({r.task for r in runs})),
            "seeds": ", ".join(map(str, sorted({r.seed for r in runs}))), "wall_s": wall}
    print(json.dumps({"figure": "heldout_split", **{k: v for k, v in meta.items() if k != "wall_s"},
                      "thresholds": len(results), "overall": pooled, "wall_s": round(wall, 1)}), flush=True)
    if args.markdown:
        args.markdown.write_text(markdown(results, pooled, meta))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
