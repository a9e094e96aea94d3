"""Sweeps: start one (New sweep), and for a Hydra multirun dir the stability map over one or two swept parameters (each
cell its seeds' mean score ± spread, healthy share and most common root cause, or each seed apart) and parallel
coordinates, filled in live while its runs train."""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from playground.rundir.score import final_score

import charts
import data
import launcher
import run_params
import running
import sweep_form
import sweep_map
import widgets

NONE = "(none)"
CELL_MODES = ("mean", "seeds")


def _score(run: str) -> float:
    """The run's score as the sweeper's objective and the diagnosis read it (NaN before it has one)."""
    value = final_score(data.metrics_frame(run), data.run_info(run))
    return math.nan if value is None else value


def sweep_table(jobs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """One row per job: its parameters, score so far, root cause and health; and the parameters that vary."""
    rows = [{"run": job["run"], "label": job["label"], "job": job["job"], "overrides": job["overrides"],
             "score": _score(job["run"]), "chain": job["chain"],
             "status": job["status"], "mystery": job["mystery"]} for _, job in jobs.iterrows()]
    return sweep_map.sweep_jobs(rows)


def seed_view(sweep_frame: pd.DataFrame, x: str | None, y: str | None, seed: str | None, by: str,
              orders: tuple[list[str], list[str]]) -> None:
    """Each seed apart: the map with every cell split into its seeds, and one cell's runs, to show on the panels."""
    cells = sweep_map.seed_cells(sweep_frame, x, y, seed)
    heat = charts.heatmap(cells, by=by, x_title=x or "", y_title=y, x_order=orders[0], y_order=orders[1],
                          score_title=widgets.t("by_score"), seeds=True)
    with st.container(key="sweep-seed-heatmap"):
        st.vega_lite_chart(spec=charts.to_spec(heat), width="stretch")
    pairs = sorted(set(zip(cells["x"], cells["y"], strict=True)),  # as the map reads: top row first
                   key=lambda p: (orders[1].index(p[1]), orders[0].index(p[0])))
    names = {f"{xv}\t{yv}": " · ".join(f"{k}={v}" for k, v in ((x, xv), (y, yv)) if k) for xv, yv in pairs}
    cell = st.selectbox(widgets.t("sweep_cell"), list(names), format_func=widgets.label_of(names), key="sweep_cell")
    xv, yv = str(cell).split("\t", 1)
    rows = sweep_frame[((cells["x"] == xv) & (cells["y"] == yv)).to_numpy()]
    st.button(widgets.t("show_cell", n=len(rows)), on_click=widgets.set_runs, args=(list(rows["run"]),),
              key="show_cell")
    columns = ["label", *([seed] if seed else []), "score", "root", "healthy", "status"]
    st.dataframe(rows[columns], hide_index=True, width="stretch", key="sweep_cell_table")


def sweep_body(sweep: str) -> bool:
    """The chosen sweep's map, parallel coordinates and table, read now; returns whether its runs still train."""
    table, _ = widgets.runs_table()
    jobs = table[table["sweep"] == sweep].sort_values("job", key=lambda j: pd.to_numeric(j, errors="coerce"))
    job = launcher.shared().job_for(sweep, ("sweep",))
    active = bool((jobs["status"] == "running").any()) or (job is not None and job.active)
    sweep_frame, swept = sweep_table(jobs)
    st.caption(widgets.t("sweep_caption", n=len(jobs), params=", ".join(swept) or NONE))
    if active:
        st.caption(widgets.t("sweep_live", s=widgets.LIVE_S))
    running.stop_button(job, key="sweep_stop")
    st.button(widgets.t("show_sweep"), on_click=widgets.set_runs, args=(list(jobs["run"]),), key="show_sweep")
    if not swept:
        st.info(widgets.t("no_swept"))
        return active
    seeds = [p for p in swept if run_params.is_seed(p)]
    axes = [p for p in swept if not run_params.is_seed(p)]
    seed = seeds[0] if seeds else None
    c1, c2, c3 = st.columns(3)
    x_options = axes or [NONE]  # only seeds vary: one cell
    x = c1.selectbox(widgets.t("heat_x"), x_options, key="heat_x", disabled=x_options == [NONE])
    y_options = [p for p in axes if p != x] or [NONE]  # one knob: one row
    y = c2.selectbox(widgets.t("heat_y"), y_options, key="heat_y", disabled=y_options == [NONE])
    x_key, y_key = (None if v == NONE else v for v in (x, y))
    by_names = {v: widgets.t(f"by_{v}") for v in ("score", "root")}
    by = widgets.picked(c3.radio(widgets.t("color_by"), list(by_names), format_func=widgets.label_of(by_names),
                                 key="color_by", horizontal=True))
    orders = (sweep_map.sort_values(sweep_frame[x_key]) if x_key else ["—"],
              sweep_map.sort_values(sweep_frame[y_key])[::-1] if y_key else ["—"])
    st.subheader(widgets.t("stability_map"))
    mode_names = {m: widgets.t(f"cells_{m}") for m in CELL_MODES}
    mode = st.radio(widgets.t("cells"), list(mode_names), format_func=widgets.label_of(mode_names), key="sweep_cells",
                    horizontal=True)
    if mode == "seeds":
        st.caption(widgets.t("seeds_caption", seed=seed or NONE))
        seed_view(sweep_frame, x_key, y_key, seed, by, orders)
    else:
        cells = sweep_map.sweep_cells(sweep_frame, x_key, y_key, healthy_text=widgets.t("healthy_share"))
        n = sorted(set(cells["runs"]))
        counts = str(n[0]) if len(n) == 1 else f"{n[0]}–{n[-1]}"
        st.caption(widgets.t("cells_caption", n=counts))
        heat = charts.heatmap(cells, by=by, x_title=x_key or "", y_title=y_key, x_order=orders[0],
                              y_order=orders[1], score_title=widgets.t("by_score"))
        with st.container(key="sweep-heatmap"):
            st.vega_lite_chart(spec=charts.to_spec(heat), width="stretch")
    st.subheader(widgets.t("parallel"))
    score_axis = widgets.t("by_score")
    dims = [*axes, *seeds, score_axis]
    drawn = sweep_frame.assign(**{score_axis: sweep_frame["score"].round(4), "run": sweep_frame["label"]})
    chart = charts.parallel_chart(sweep_map.parallel_long(drawn, dims), dims, by=by, score_title=score_axis)
    with st.container(key="sweep-parallel"):
        st.vega_lite_chart(spec=charts.to_spec(chart), width="stretch")
    st.dataframe(sweep_frame.drop(columns="run"), hide_index=True, width="stretch", key="sweep_table")
    return active


def pending_body(pending: str) -> bool:
    """A sweep just started and not listed yet: its job's state, until its runs appear."""
    job = launcher.shared().job_for(pending, ("sweep",))
    st.info(widgets.t("sweep_pending", name=pending.rsplit("/", 1)[-1],
                      state=running.job_state(job) if job else ""))
    if job is not None and not job.active and job.output():
        st.code(job.output(), language="text")
    table, _ = widgets.runs_table()
    return pending not in set(table["sweep"]) and job is not None and job.active


def render() -> None:
    st.title(widgets.t("sweeps_title"))
    table, _ = widgets.runs_table()
    sweeps = sorted(s for s in table["sweep"].unique() if s)
    with st.expander(widgets.t("sweep_new"), expanded=not sweeps, icon=":material/add:"):
        sweep_form.form()
    pending = st.session_state.get(sweep_form.PENDING)
    if pending in sweeps:
        st.session_state["sweep"] = st.session_state.pop(sweep_form.PENDING)
    elif pending:
        job = launcher.shared().job_for(pending, ("sweep",))
        if job is None:  # the explorer restarted: nothing to wait for
            st.session_state.pop(sweep_form.PENDING)
        else:
            running.live_section(pending_body, job.active, "sweep_pending", pending)
    if not sweeps:
        if not pending:
            st.info(widgets.t("no_sweeps"))
        return
    names = {s: str(table.loc[table["sweep"] == s, "name"].iloc[0]).rsplit("/", 1)[0] for s in sweeps}
    sweep = st.selectbox(widgets.t("pick_sweep"), sweeps[::-1], format_func=widgets.label_of(names), key="sweep")
    live = bool((table.loc[table["sweep"] == sweep, "status"] == "running").any())
    job = launcher.shared().job_for(sweep, ("sweep",))
    running.live_section(sweep_body, live or (job is not None and job.active), "sweep", sweep)


if __name__ == "__main__":
    render()
