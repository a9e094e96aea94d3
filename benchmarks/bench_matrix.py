"""The scenario matrix at 1 seed and at its 10-seed panel, side by side in one run (issue 16's figure: 10 seeds cost
at most 4× one seed, because a cell's seeds train as one batch of agents), and the panel's matrix as Markdown.

    python -m benchmarks.bench_matrix [--markdown matrix.md]

Both matrices run every task × scenario with two multiruns at a time, one torch thread each (as
`benchmarks.scenario_matrix`). The 1-seed matrix uses the panel's first seed. The 10-seed matrix's run dirs stay in
outputs/bench/scenario_matrix, where `benchmarks.diagnosis_panel` (next in `make bench`) reads them.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from benchmarks.common import emit
from benchmarks.diagnosis_panel import BENCH_RUNS
from benchmarks.scenario_matrix import PANEL, cells, markdown, meets_bar, run_matrix


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", type=Path, default=None, help="write the 10-seed matrix here as a table")
    args = parser.parse_args()
    todo = cells(None, None)
    _, one_wall = run_matrix(PANEL[:1], todo)
    # the panel's run dirs are kept for benchmarks.diagnosis_panel, which re-diagnoses them with today's rules
    shutil.rmtree(BENCH_RUNS, ignore_errors=True)
    results, panel_wall = run_matrix(PANEL, todo, out=BENCH_RUNS)
    emit("scenario_matrix_wall_1_seed", round(one_wall, 1), "s", cells=len(todo))
    emit("scenario_matrix_wall_10_seeds", round(panel_wall, 1), "s", cells=len(todo),
         meet_the_bar=sum(map(meets_bar, results)))
    emit("scenario_matrix_10_vs_1_seed", round(panel_wall / one_wall, 2), "x", target="<= 4")
    table = markdown(results, panel_wall)
    if args.markdown:
        args.markdown.write_text(table)
    print(table)


if __name__ == "__main__":
    main()
