"""What a finished run says in the terminal: how it ended, its score, the diagnosis's root cause and the command that
applies its fix, read back from the run dir as the explorer reads it."""

from __future__ import annotations

from pathlib import Path

from playground import PYTHON, STREAMLIT
from playground.config.overrides import fix_command
from playground.diagnose import onset, root_causes
from playground.failures import TITLES
from playground.metrics import STEP, fmt
from playground.rundir.runs import METRICS, read_findings, read_metrics_jsonl, read_run_info
from playground.rundir.score import records_score, score_metric


def summary_lines(run_dir: str | Path) -> list[str]:
    """A few lines: status and steps, the score against its target, the root cause, the last good step before the
    first problem (and its checkpoint), its fix as a command to paste
    (the run's own overrides with the fix's replacing theirs), and where to read more."""
    run_dir = Path(run_dir)
    info = read_run_info(run_dir) or {}
    records = read_metrics_jsonl(run_dir / METRICS).records
    steps = int(max((r.get(STEP, 0) for r in records), default=0))
    ended = info.get("status", "unknown")
    why = info.get("error") or info.get("stop_reason")
    lines = [f"run {ended} after {steps} step{'s' * (steps != 1)}" + (f" ({why})" if why else "")]
    metric = score_metric(info, {key for r in records for key in r})
    target = info.get("score_target")
    lines.append(f"score: {metric} {fmt(records_score(records, info), none='-')}"
                 + (f" (target {fmt(target)})" if target is not None else ""))
    report = read_findings(run_dir)
    items = root_causes.chain(report)
    root = root_causes.run_root(items)
    title = TITLES.get(root, {}).get("en", "")
    lines.append(f"diagnosis: {root}" + (f" ({title})" if title else ""))
    if good := onset.last_good_line((report or {}).get("last_good")):
        lines.append(good)
    fix = next((item["finding"].get("fix") for item in items if item["finding"].get("id") == root), "")
    if fix:
        lines.append(f"fix: {fix_command(info.get('overrides') or [], fix)}")
    lines.append(f"more: {PYTHON} -m playground.diagnose {run_dir}   (or the explorer: {STREAMLIT} run app)")
    return lines
