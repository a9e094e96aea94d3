"""Explorer timings on 200 synthetic runs x 500 steps: run list and panels, cold and on a cached rerun.

Run from the repo root: `python -m benchmarks.bench_explorer [--runs 200 --steps 500 --shown 4]`. Prints one
JSON line per measurement. "apptest" rows time a whole page through `streamlit.testing.v1.AppTest` (the
script, the sidebar and every element, no browser); "direct" rows time `app/data.py` and `app/sections.py`
functions alone. "cold" means Streamlit's caches were cleared first (modules already imported, files in the
OS page cache); "cached" is the same rerun again.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "app"), str(ROOT)]  # the app's modules import each other by name

from tests.app.app_helpers import ENTRY  # noqa: E402
from tests.app.fake_runs import finding, write_run  # noqa: E402


def make_runs(root: Path, runs: int, steps: int) -> list[Path]:
    """`runs` fake runs: three quarters single runs under outputs/, the rest one multirun sweep."""
    made = []
    sweep_jobs = runs // 4
    for i in range(runs - sweep_jobs):
        unstable = i % 5 == 4
        made.append(write_run(root / "outputs" / "2026-11-30" / f"{i // 60:02d}-{i % 60:02d}-00", seed=i % 3,
                              steps=steps, unstable=unstable, scenario="lr_too_high" if unstable else "healthy",
                              findings=[finding("lr_too_high" if unstable else "healthy",
                                                "warning" if unstable else "info", 1, steps)]))
    sweep = root / "multirun" / "2026-11-30" / "12-00-00"
    sweep.mkdir(parents=True)
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    for job in range(sweep_jobs):
        lr = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)[job % 5]
        overrides = ["task=cartpole", f"actor_rollout_ref.actor.optim.lr={lr}",
                     f"actor_rollout_ref.actor.clip_ratio_high={(0.1, 0.2, 0.3)[job // 5 % 3]}", f"seed={job // 15}"]
        made.append(write_run(sweep / str(job), seed=job // 15, steps=steps, overrides=overrides,
                              unstable=lr >= 1e-3, findings=[finding("healthy", "info", 1, steps)]))
    return made


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def emit(what: str, mode: str, method: str, seconds: float, **extra) -> None:
    print(json.dumps({"what": what, "mode": mode, "method": method, "seconds": round(seconds, 3), **extra}),
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--shown", type=int, default=4, help="runs overlaid on the panels")
    args = parser.parse_args()

    import streamlit as st
    from streamlit.logger import set_log_level
    from streamlit.testing.v1 import AppTest

    set_log_level("error")  # bare mode warns once per cached function

    from playground.metrics import STEP

    import data
    import sections
    import series

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        seconds, runs = timed(lambda: make_runs(root, args.runs, args.steps))
        emit("generate runs", "-", "fake_runs", seconds, runs=len(runs), steps=args.steps)
        os.environ["PLAYGROUND_RUNS"] = os.pathsep.join([str(root / "outputs"), str(root / "multirun")])
        roots = tuple(str(p) for p in data.configured_roots())

        # ---- direct: the data layer alone ----
        st.cache_data.clear()
        seconds, (table, _) = timed(lambda: data.list_runs(roots))
        emit("run list (run.json + findings.json)", "cold", "direct", seconds, runs=len(table))
        seconds, _ = timed(lambda: data.list_runs(roots))
        emit("run list (run.json + findings.json)", "cached", "direct", seconds)
        window = series.ema_window(0.6)
        for mode in ("cold", "cached"):
            seconds, _ = timed(lambda: [data.smoothed_last(r, "critic/score/mean", 0.6, window) for r in table["run"]])
            emit("sort by smoothed critic/score/mean (file tails)", mode, "direct", seconds, runs=len(table))
        shown = table.sort_values("name")[: args.shown]
        rows = shown.assign(label=[f"r{i}" for i in range(len(shown))])
        for mode in ("cold", "cached"):
            seconds, (sources, frame_by_label, status_by_label, _) = timed(lambda: sections.run_sources(rows, True))
            emit(f"read + diagnose {len(rows)} runs", mode, "direct", seconds, steps=args.steps)
        keys = tuple((s.label, s.key, s.group, s.family) for s in sources)
        for mode in ("cold", "cached"):
            seconds, spec = timed(lambda: sections._metric_spec(keys, "actor/pg_clipfrac", ("step", 0.6, True), "step",
                                                                "actor/pg_clipfrac", frame_by_label, status_by_label))
            emit("one chart spec (actor/pg_clipfrac)", mode, "direct", seconds, runs=len(rows),
                 points=sum(len(v) for v in spec["datasets"].values()))
        long = series.metric_long(frame_by_label, "actor/pg_clipfrac", max_points=1000)
        emit("points drawn per line (downsampled)", "-", "direct", 0.0, steps=args.steps,
             points=int(long.groupby("run").size().max()), first_step=float(frame_by_label["r0"][STEP].iloc[0]))

        # ---- apptest: whole pages ----
        st.cache_data.clear()
        at = AppTest.from_file(ENTRY, default_timeout=120)
        seconds, _ = timed(at.run)
        emit("runs page (list of all runs)", "cold", "apptest", seconds, runs=len(table))
        seconds, _ = timed(at.run)
        emit("runs page (list of all runs)", "cached", "apptest", seconds)
        at.multiselect(key="runs").set_value(list(shown["run"])).run()
        st.cache_data.clear()
        at.switch_page("views/panels.py")
        seconds, _ = timed(at.run)
        charts = len(at.get("vega_lite_chart"))
        emit("panels page (the 4 recommended panels)", "cold", "apptest", seconds, runs=len(shown), charts=charts)
        seconds, _ = timed(at.run)
        emit("panels page (the 4 recommended panels)", "cached", "apptest", seconds, runs=len(shown), charts=charts)
        at.button_group(key="panel_choice").set_value("actor").run()
        seconds, _ = timed(at.run)
        emit("panels page (one group: actor)", "cached", "apptest", seconds, charts=len(at.get("vega_lite_chart")))
        assert not at.exception, [e.message for e in at.exception]


if __name__ == "__main__":
    main()
