"""The diagnosis panel: how the engine generalises, per finding id, on three sets it was not fitted to, in one table.

    python -m benchmarks.diagnosis_panel [--scenario-runs DIR] [--markdown docs/diagnosis-panel.md]

- **real**: the public verl logs of `tests/diagnose/fixtures/real/logs.yaml` (sources and verdicts in its
  SOURCES.md), each diagnosed as a user's first try would (`python -m playground.diagnose LOG`, no option): a healthy
  log is right when it gives no warning, a failure log when its expected id (`root`, or one of `roots` where its
  reporter names several) is the root of a diagnosis.
- **scenarios**: the playground's scenario panel, as `benchmarks.scenario_matrix` trains and judges it: the run dirs
  of `python -m benchmarks.scenario_matrix --out DIR` (or `make bench`'s, kept in outputs/bench/scenario_matrix),
  each re-diagnosed with today's rules; a cell is right on a seed where its id is a root (healthy: no warning).
- **peer**: rldoctor's simulated pathologies written with verl's names (`benchmarks.peer_suite`), 5 seeds each.

For each set and id: how many cases expect it and on how many it is the root (recall), and false alarms: on how many
healthy cases it is a warning. The tests hold a floor on each set (tests/diagnose/test_diagnosis_panel.py).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

from benchmarks import peer_suite
from benchmarks.llm_calibration import NEW_TAG, PANEL, panel
from playground.diagnose.readers import read_any
from playground.diagnose.sources import diagnose_read, diagnose_run_dir
from playground.rundir.runs import find_runs, read_run_info

ROOT = Path(__file__).resolve().parents[1]
BENCH_RUNS = ROOT / "outputs" / "bench" / "scenario_matrix"  # where bench_matrix keeps its 10-seed run dirs


def expected_roots(entry: dict) -> list[str]:
    """The ids a failure log's reporter names as its cause (any one of them as a root is right)."""
    return list(entry.get("roots") or [entry["root"]])


def warnings_of(report) -> list[str]:
    return sorted({f.id for f in report.findings if f.severity != "info"})


def judge_real() -> list[dict]:
    """Every real log: its verdict, the engine's roots and warnings, and whether it is right."""
    out = []
    for entry in panel():
        report = diagnose_read(read_any(PANEL / entry["file"]))
        warnings = warnings_of(report)
        if entry["verdict"] == "healthy":
            expected, right = [], not warnings
        else:
            expected = expected_roots(entry)
            right = any(fid in report.roots() for fid in expected)
        out.append({"set": "real", "case": entry["file"], "expected": expected, "right": right,
                    "roots": report.roots(), "warnings": warnings, "tags": entry.get("tags", [])})
    return out


def judge_scenarios(runs_dir: Path) -> list[dict]:
    """Every run dir of a scenario matrix: re-diagnosed with today's rules (its findings.json is not rewritten)."""
    out = []
    for run in find_runs([runs_dir]):
        info = read_run_info(run) or {}
        scenario = info.get("scenario")
        if not scenario or not (run / "metrics.jsonl").is_file():
            continue
        report = diagnose_run_dir(run, write=False)
        warnings = warnings_of(report)
        right = not warnings if scenario == "healthy" else scenario in report.roots()
        out.append({"set": "scenarios", "case": f"{info.get('task')}/{scenario}/{info.get('seed')}",
                    "expected": [] if scenario == "healthy" else [scenario], "right": right,
                    "roots": report.roots(), "warnings": warnings})
    return out


def judge_peer(seeds=peer_suite.SEEDS) -> list[dict]:
    return [{"set": "peer", "case": f"{row['scenario']}/{row['seed']}", "expected": [row["expected"]] if
             row["expected"] else [], "right": row["named"], "roots": row["roots"], "warnings": row["warnings"]}
            for row in peer_suite.run_suite(seeds)]


def table(rows: list[dict]) -> list[dict]:
    """Per set and id: cases expecting it, cases where it is the root, healthy cases where it warns."""
    cells: dict[tuple[str, str], dict] = defaultdict(lambda: {"expected": 0, "named": 0, "false_alarms": 0})
    healthy: dict[str, int] = defaultdict(int)
    for row in rows:
        if not row["expected"]:
            healthy[row["set"]] += 1
            for fid in row["warnings"]:
                cells[(row["set"], fid)]["false_alarms"] += 1
            cells[(row["set"], "healthy")]["expected"] += 1
            cells[(row["set"], "healthy")]["named"] += row["right"]
            continue
        key = (row["set"], row["expected"][0])
        cells[key]["expected"] += 1
        cells[key]["named"] += row["right"]
    return [{"set": s, "id": fid, **cell, "healthy_cases": healthy[s]} for (s, fid), cell in sorted(cells.items())]


def pathologies_named(peer_rows: list[dict], at_least: float = 0.8) -> dict[str, bool]:
    """Per rldoctor pathology (its healthy run left out): named on at least `at_least` of its seeds."""
    by: dict[str, list[bool]] = defaultdict(list)
    for row in peer_rows:
        scenario = row["case"].split("/")[0]
        if scenario != "healthy":
            by[scenario].append(row["right"])
    return {s: sum(hits) >= at_least * len(hits) for s, hits in by.items()}


def markdown(rows: list[dict], wall: float) -> str:
    """The table, a line per set and id, then each case the engine got wrong."""
    lines = ["| set | id | cases | named as root | recall | false alarms (healthy cases warned) |",
             "|---|---|---|---|---|---|"]
    for cell in table(rows):
        recall = f"{cell['named'] / cell['expected']:.0%}" if cell["expected"] else "–"
        alarms = f"{cell['false_alarms']}/{cell['healthy_cases']}" if cell["healthy_cases"] else "–"
        lines.append(f"| {cell['set']} | {cell['id']} | {cell['expected']} | {cell['named']} | {recall} | {alarms} |")
    for name in ("real", "scenarios", "peer"):
        part = [r for r in rows if r["set"] == name]
        if part:
            lines.append(f"\n**{name}**: {sum(r['right'] for r in part)} of {len(part)} cases right.")
        if new := [r for r in part if NEW_TAG in r.get("tags", [])]:
            lines.append(f"Of them tagged {NEW_TAG} (issue 51's new sources): {sum(r['right'] for r in new)} of "
                         f"{len(new)}.")
    if peer := [r for r in rows if r["set"] == "peer"]:
        named = pathologies_named(peer)
        lines.append(f"rldoctor's pathologies named on at least 4 of 5 seeds: {sum(named.values())} of {len(named)} "
                     f"({', '.join(s for s, ok in named.items() if not ok) or 'none missed'}); its healthy runs "
                     f"quiet on {sum(r['right'] for r in peer if r['case'].startswith('healthy/'))} of "
                     f"{sum(r['case'].startswith('healthy/') for r in peer)} seeds.")
    wrong = [r for r in rows if not r["right"]]
    if wrong:
        lines += ["", "| set | case | expected | roots | warnings |", "|---|---|---|---|---|"]
        lines += [f"| {r['set']} | {r['case']} | {', '.join(r['expected']) or 'no warning'} | "
                  f"{', '.join(r['roots'])} | {', '.join(r['warnings']) or '–'} |" for r in wrong]
    lines.append(f"\n{wall:.1f} s of wall time.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.diagnosis_panel", description=__doc__.splitlines()[0])
    parser.add_argument("--scenario-runs", type=Path, default=None,
                        help="a scenario matrix's run dirs (scenario_matrix --out); default: make bench's, if kept")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the table here")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    rows = judge_real() + judge_peer()
    runs = args.scenario_runs or (BENCH_RUNS if BENCH_RUNS.is_dir() else None)
    if runs is not None:
        rows += judge_scenarios(runs)
    wall = time.perf_counter() - start
    for cell in table(rows):
        print(json.dumps({"figure": "diagnosis_panel", **cell}), flush=True)
    for name in ("real", "scenarios", "peer"):
        part = [r for r in rows if r["set"] == name]
        print(json.dumps({"figure": f"diagnosis_panel_{name}", "right": sum(r["right"] for r in part),
                          "cases": len(part)}), flush=True)
    new = [r for r in rows if NEW_TAG in r.get("tags", [])]  # reported apart: issue 51's logs, scored as they came
    print(json.dumps({"figure": f"diagnosis_panel_real_{NEW_TAG}", "right": sum(r["right"] for r in new),
                      "cases": len(new)}), flush=True)
    if args.markdown:
        args.markdown.write_text(markdown(rows, wall), encoding="utf-8")
    else:
        print(markdown(rows, wall))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
