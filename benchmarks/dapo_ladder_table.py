"""The DAPO ladder (`+sweep=dapo_ladder`) as Markdown: one row per rung, its seeds aggregated (mean ± std, n − 1).

`python -m benchmarks.dapo_ladder_table <multirun dir> [--last N]` reads only the sweep's run dirs (`run.json`,
`metrics.jsonl`, `findings.json`, `.hydra/`), through `playground.sweep.job_rows` (the jobs, their overrides and
diagnoses, as the explorer's Sweeps page reads them). Per rung: the final greedy val/accuracy, the first validated
step at the task's score target, actor/entropy and response_length/mean over the last N training steps, the mean
response_length/clip_ratio (the share of responses cut at max_response_length), train/zero_adv_group_ratio and
train/num_gen_batches over all steps (— where the rung does not log it), the run's wall seconds (run.json; the seeds
of a rung train as one batch, so they share it) and the diagnosed roots.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import yaml

from benchmarks.sweep_maps import sweep_map
from playground.metrics import STEP, canonical_name
from playground.rundir.runs import read_metrics_jsonl
from playground.sweep import job_dirs, job_rows

LADDER = "ladder"  # the override key of the rungs (`+ladder=<rung>`, conf/ladder/)
LAST = 10  # training steps behind the "last steps" columns
# as the readers name them (actor/entropy: the pre-update entropy, which the trainer logs under both entropy names)
ACC, ENTROPY, LENGTH = (canonical_name(k) for k in ("val/accuracy", "actor/entropy", "response_length/mean"))
ZERO_ADV, GEN_BATCHES, TRUNCATED = (canonical_name(k) for k in (
    "train/zero_adv_group_ratio", "train/num_gen_batches", "response_length/clip_ratio"))


def _values(records: Sequence[dict], key: str) -> list[tuple[int, float]]:
    return [(int(r[STEP]), float(r[key])) for r in records if key in r and math.isfinite(float(r[key]))]


def _score_target(run_dir: Path) -> float | None:
    try:
        cfg = yaml.safe_load((run_dir / ".hydra" / "config.yaml").read_text(encoding="utf-8"))
        return float(cfg["task"]["score_target"])
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError):
        return None


def run_figures(run_dir: Path, info: dict, last: int = LAST) -> dict[str, float]:
    """One run's figures (NaN where it has none)."""
    records = read_metrics_jsonl(run_dir / "metrics.jsonl").records
    acc = _values(records, ACC)
    target = _score_target(run_dir)
    reached = [step for step, value in acc if target is not None and value >= target]

    def tail_mean(key: str, n: int | None = last) -> float:
        values = [v for _, v in _values(records, key)]
        return float(np.mean(values[-n:] if n else values)) if values else math.nan

    start, end = info.get("start_time"), info.get("end_time")
    return {"acc": acc[-1][1] if acc else math.nan, "to_target": float(reached[0]) if reached else math.nan,
            "entropy": tail_mean(ENTROPY), "length": tail_mean(LENGTH), "zero_adv": tail_mean(ZERO_ADV, None),
            "gen_batches": tail_mean(GEN_BATCHES, None), "truncated": tail_mean(TRUNCATED, None),
            "wall": float(end - start) if start is not None and end is not None else math.nan}


def _cell(values: Sequence[float]) -> str:
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return "—"
    mean = float(np.mean(finite))
    spread = float(np.std(finite, ddof=1)) if len(finite) > 1 else math.nan
    return sweep_map.mean_spread(mean, spread)


def markdown(sweep: Path, last: int = LAST) -> str:
    rows, infos = job_rows(job_dirs(sweep))
    if not rows:
        raise SystemExit(f"{sweep}: no job run dirs under it")
    table, _ = sweep_map.sweep_jobs(rows)
    if LADDER not in table:
        raise SystemExit(f"{sweep}: no job has a +{LADDER}=<rung> override (is it a +sweep=dapo_ladder dir?)")
    rungs: dict[str, list[tuple[dict, str, str]]] = {}
    for (_, job), row, info in zip(table.iterrows(), rows, infos):
        figures = run_figures(Path(row["run"]), info, last)
        rungs.setdefault(str(job[LADDER]), []).append((figures, str(job["root"]), str(job["status"])))
    seeds = sorted({len(v) for v in rungs.values()})
    n = str(seeds[0]) if len(seeds) == 1 else f"{seeds[0]}–{seeds[-1]}"
    lines = [f"{len(rows)} jobs, {n} seeds a rung; mean ± std (n − 1) over the seeds. Last steps: the last {last} "
             "training steps. Steps to target: the first validation at the task's score target.", "",
             "| rung | final val/accuracy | steps to target | actor/entropy (last) | response_length/mean (last) "
             "| response_length/clip_ratio | zero_adv_group_ratio | num_gen_batches | wall s | roots |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for rung in sweep_map.sort_values(rungs):
        runs = rungs[rung]
        col = {k: _cell([f[k] for f, _, _ in runs]) for k in runs[0][0]}
        failed = [s for _, _, s in runs if s not in ("finished", "running")]
        roots = sweep_map.root_counts([r for _, r, _ in runs]) + (f" ({len(failed)} {'/'.join(sorted(set(failed)))})"
                                                                if failed else "")
        lines.append(f"| {rung} | {col['acc']} | {col['to_target']} | {col['entropy']} | {col['length']} | "
                     f"{col['truncated']} | {col['zero_adv']} | {col['gen_batches']} | {col['wall']} | {roots} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep", type=Path, help="a +sweep=dapo_ladder multirun dir (its jobs are the numbered dirs)")
    parser.add_argument("--last", type=int, default=LAST, help="training steps behind the last-steps columns")
    args = parser.parse_args(argv)
    print(markdown(args.sweep, args.last))


if __name__ == "__main__":
    main()
