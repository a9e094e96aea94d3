"""The fix table: every scenario's offered fix, applied as the Lab's Apply and rerun applies it, on panel seeds, and
whether it clears the scenario's finding.

    python -m benchmarks.fix_table [--seeds 101-103] [--tasks cartpole,reverse] [--markdown docs/fixes.md]

Per cell (task x scenario, healthy left out): the scenario trains on each seed until its finding appears
(`trainer.stop_on_finding`, as CI shortens it; a crash runs until the trainer stops it), and the fix its
`findings.json` names for that finding (the first rule that fired names it) is applied the way Apply and rerun does
(`overrides.with_replaced`: the run's overrides, the fix's keys replaced) to a full run of the same seed. The fix
clears the finding where the rerun's diagnosis no longer holds that id. "What broke it" is the playground knob the
finding names apart from its fix (its `injected`: a cause no verl run has; what it is in verl: the report). The seeds
of a cell that got the same fix train as one batch (`hydra/launcher=batched`), two cells at a time. One JSON line per
cell, then a table.
"""

from __future__ import annotations

import argparse
import json
import shlex
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.scenario_matrix import cells, seeds_arg, train_cell
from playground.diagnose.injected import knob
from playground.rundir.runs import find_runs, read_findings, read_run_info

SEEDS = (101, 102, 103)  # the first three of the scenario matrix's panel, tuned on by no scenario


def _finding(run: Path, sid: str) -> dict | None:
    return next((f for f in (read_findings(run) or {}).get("findings", []) if f.get("id") == sid), None)


def _seed_of(run: Path) -> int | None:
    return (read_run_info(run) or {}).get("seed")


def fix_cell(task: str, scenario: str, seeds: tuple[int, ...], base: Path) -> dict:
    """Break, then fix, one cell on the seeds; returns what the fix did."""
    stop = [] if scenario == "training_crash" else [f"trainer.stop_on_finding={scenario}"]
    broken = base / f"{task}_{scenario}"
    train_cell(task, scenario, seeds, broken, stop)
    fixes: dict[str, list[int]] = {}  # the fix a seed's run named -> those seeds
    missed, causes = [], set()
    for run in find_runs([broken]):
        finding = _finding(run, scenario)
        if finding is None:
            missed.append(_seed_of(run))
        else:
            fixes.setdefault(finding.get("fix") or "", []).append(_seed_of(run))
            causes |= {knob(c) for c in finding.get("injected") or []}  # what broke it, apart from the fix
    cleared, still, extra = 0, [], {}
    for k, (fix, fix_seeds) in enumerate(sorted(fixes.items())):
        if not fix or "<" in fix:  # no override to apply (or a placeholder): Apply and rerun is not offered
            still += fix_seeds
            continue
        # Apply and rerun: the run's overrides (task, scenario, seed: train_cell's own) with the fix's on top
        fixed = base / f"{task}_{scenario}_fix{k}"
        train_cell(task, scenario, tuple(fix_seeds), fixed, shlex.split(fix))
        for run in find_runs([fixed]):
            report = read_findings(run) or {}
            ids = {f["id"] for f in report.get("findings", [])}
            if scenario in ids:
                still.append(_seed_of(run))
            else:
                cleared += 1
            for fid in {f["id"] for f in report.get("findings", []) if f.get("severity") in ("warning", "critical")}:
                extra[fid] = extra.get(fid, 0) + 1
    return {"task": task, "scenario": scenario, "cause": " ".join(sorted(causes)) or None,
            "fix": " | ".join(sorted(fixes)) or None, "seeds": len(seeds),
            "reproduced": len(seeds) - len(missed), "cleared": cleared, "not_cleared_seeds": sorted(s for s in still
                                                                                                  if s is not None),
            "warnings_after_fix": extra}


def meets_bar(row: dict) -> bool:
    """The fix clears the finding on at least 2 of 3 seeds (of those where the scenario showed it)."""
    return row["reproduced"] > 0 and row["cleared"] >= (2 / 3) * row["reproduced"]


def markdown(rows: list[dict], wall: float) -> str:
    lines = ["| task | scenario | what broke it (a playground knob) | fix (Apply and rerun) | reproduced | cleared | "
             "warnings after the fix |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        extra = ", ".join(f"{fid} {n}" for fid, n in sorted(r["warnings_after_fix"].items())) or "–"
        mark = "" if meets_bar(r) else " ✗"
        fix = f"`{r['fix']}`" if r["fix"] else "(none offered)"
        cause = f"`{r['cause']}`" if r.get("cause") else "–"
        lines.append(f"| {r['task']} | {r['scenario']} | {cause} | {fix} | {r['reproduced']}/{r['seeds']} | "
                     f"{r['cleared']}/{r['reproduced']}{mark} | {extra} |")
    lines.append(f"\n{sum(map(meets_bar, rows))} of {len(rows)} cells' fixes clear their finding on at least 2 of 3 "
                 f"seeds; {wall / 60:.1f} min of wall time.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fix_table", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=seeds_arg, default=SEEDS)
    parser.add_argument("--tasks", type=lambda t: t.split(","), default=None)
    parser.add_argument("--scenarios", type=lambda t: t.split(","), default=None)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None, help="keep the run dirs here")
    parser.add_argument("--markdown", type=Path, default=None)
    args = parser.parse_args(argv)
    todo = [(t, s) for t, s in cells(args.tasks, args.scenarios) if s != "healthy"]
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        base = args.out or Path(tmp)

        def one(cell):
            row = fix_cell(*cell, args.seeds, base)
            print(json.dumps(row), flush=True)
            return row

        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            rows = list(pool.map(one, todo))
    table = markdown(rows, time.perf_counter() - start)
    if args.markdown:
        args.markdown.write_text(table, encoding="utf-8")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
