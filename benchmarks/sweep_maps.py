"""A sweep's stability map as Markdown: per cell the seeds' mean ± standard deviation of the final score, the share
of seeds diagnosed healthy and the most common root cause, the aggregation the explorer's Sweeps page draws.

`python -m benchmarks.sweep_maps <multirun dir> [--x KEY] [--y KEY]` reads only the sweep's run dirs (`run.json`,
`metrics.jsonl`, `findings.json`, `.hydra/overrides.yaml`) and prints one table: a two-knob sweep as a grid (rows:
the second knob, columns: the first), a one-knob sweep as one row per value. docs/sweeps.md's maps come from it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from playground.sweep import job_dirs, job_rows

APP = Path(__file__).resolve().parents[1] / "app"
if str(APP) not in sys.path:
    sys.path.insert(0, str(APP))

import run_params  # noqa: E402  (app/: pure pandas, no Streamlit)
import sweep_map  # noqa: E402


def short(key: str) -> str:
    """`actor_rollout_ref.actor.optim.lr` -> `lr`, for a table header."""
    return key.rsplit(".", 1)[-1]


def markdown(sweep: Path, x: str | None = None, y: str | None = None) -> str:
    rows, infos = job_rows(job_dirs(sweep))
    if not rows:
        raise SystemExit(f"{sweep}: no job run dirs under it")
    table, swept = sweep_map.sweep_jobs(rows)
    seeds = [k for k in swept if run_params.is_seed(k)]
    axes = [k for k in swept if not run_params.is_seed(k)]
    x = x or (axes[0] if axes else None)
    y = y or next((k for k in axes if k != x), None)
    cells = sweep_map.sweep_cells(table, x, y)
    starts = [i["start_time"] for i in infos if i.get("start_time")]
    ends = [i["end_time"] for i in infos if i.get("end_time")]
    seconds = (f"; trained in {max(ends) - min(starts):.0f} s (run.json: first start to last end)"
               if starts and ends else "")
    sizes = sorted(set(cells["runs"]))
    n = str(sizes[0]) if len(sizes) == 1 else f"{sizes[0]}–{sizes[-1]}"
    lines = [f"{len(rows)} jobs, {n} seeds a cell ({', '.join(seeds) or 'no seed key'}); swept: "
             f"{', '.join(axes) or '—'}{seconds}. Cell: mean ± std (n − 1) of the final score · healthy seeds · "
             f"most common root cause.", ""]
    x_order = sweep_map.sort_values(cells["x"])
    if y is None:
        lines += [f"| {short(x) if x else ''} | final score | healthy | most common root | roots |",
                  "|---|---|---|---|---|"]
        for xv in x_order:
            c = cells[cells["x"] == xv].iloc[0]
            share = f"{c['healthy']}/{c['judged']}" if c["judged"] else "—"
            lines.append(f"| {xv} | {sweep_map.mean_spread(c['score'], c['spread'])} | {share} | {c['root']} | "
                         f"{c['roots']} |")
    else:
        lines += [f"| {short(y)} \\ {short(x)} | " + " | ".join(x_order) + " |", "|---" * (len(x_order) + 1) + "|"]
        for yv in sweep_map.sort_values(cells["y"]):
            row = cells[cells["y"] == yv].set_index("x")
            lines.append(f"| {yv} | " + " | ".join(row.loc[xv, "label"] if xv in row.index else "" for xv in x_order)
                         + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep", type=Path, help="a Hydra multirun dir (its jobs are the numbered dirs in it)")
    parser.add_argument("--x", help="the knob along the columns (default: the first swept, seeds aside)")
    parser.add_argument("--y", help="the knob along the rows (default: the second swept)")
    args = parser.parse_args(argv)
    print(markdown(args.sweep, args.x, args.y))


if __name__ == "__main__":
    main()
