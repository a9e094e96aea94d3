"""Sweeps: start one (New sweep), and for a Hydra multirun dir the stability map over two swept parameters and
parallel coordinates, filled in live while its runs train."""

from __future__ import annotations

import pandas as pd
import streamlit as st

import charts
import data
import frames
import launcher
import running
import sweep_form
import widgets

NONE = "(none)"


def sweep_table(jobs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """One row per job: its parameters, score so far and diagnosis id; and the parameters that vary."""
    rows = []
    for _, job in jobs.iterrows():
        params = frames.parse_overrides(job["overrides"])
        if job["mystery"]:
            diagnosis = "?"
        else:  # findings.json is written when a run ends; until then the cell says it is still training
            diagnosis = "running" if job["status"] == "running" else frames.worst_finding(job["findings"])
        rows.append({"run": job["label"], "job": job["job"], **params,
                     "score": frames.final_score(data.metrics_frame(job["run"])), "diagnosis": diagnosis,
                     "status": job["status"]})
    table = pd.DataFrame(rows)
    fixed = {"run", "job", "score", "diagnosis", "status"}
    swept = [c for c in table.columns if c not in fixed and table[c].astype(str).nunique() > 1]
    for column in swept:
        table[column] = table[column].fillna("—").astype(str)
    return table, swept


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
    axes = [p for p in swept if not frames.is_seed(p)] or swept
    c1, c2, c3 = st.columns(3)
    x = c1.selectbox(widgets.t("heat_x"), axes, key="heat_x")
    y_options = [p for p in axes if p != x] or [NONE]
    y = c2.selectbox(widgets.t("heat_y"), y_options, key="heat_y")
    by_names = {v: widgets.t(f"by_{v}") for v in ("score", "diagnosis")}
    by = c3.radio(widgets.t("color_by"), list(by_names), format_func=by_names.get, key="color_by", horizontal=True)
    cells_in = sweep_frame.assign(**{NONE: "—"}) if y == NONE else sweep_frame
    cells = frames.sweep_cells(cells_in, x, y)
    st.subheader(widgets.t("stability_map"))
    heat = charts.heatmap(cells, by=by, x_title=x, y_title=y, x_order=frames.sort_values(cells["x"]),
                          y_order=frames.sort_values(cells["y"])[::-1], score_title=widgets.t("by_score"))
    with st.container(key="sweep-heatmap"):
        st.vega_lite_chart(spec=charts.to_spec(heat), width="stretch")
    st.subheader(widgets.t("parallel"))
    score_axis = widgets.t("by_score")
    dims = [*swept, score_axis]
    long = frames.parallel_long(sweep_frame.assign(**{score_axis: sweep_frame["score"].round(4)}), dims)
    chart = charts.parallel_chart(long, dims, by=by, score_title=widgets.t("by_score"))
    with st.container(key="sweep-parallel"):
        st.vega_lite_chart(spec=charts.to_spec(chart), width="stretch")
    st.dataframe(sweep_frame, hide_index=True, width="stretch", key="sweep_table")
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
    sweep = st.selectbox(widgets.t("pick_sweep"), sweeps[::-1], format_func=names.get, key="sweep")
    live = bool((table.loc[table["sweep"] == sweep, "status"] == "running").any())
    job = launcher.shared().job_for(sweep, ("sweep",))
    running.live_section(sweep_body, live or (job is not None and job.active), "sweep", sweep)


if __name__ == "__main__":
    render()
