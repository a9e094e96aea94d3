"""Sweeps: for a Hydra multirun dir, the stability map over two swept parameters and parallel coordinates."""

from __future__ import annotations

import pandas as pd
import streamlit as st

import charts
import data
import frames
import widgets

NONE = "(none)"


def sweep_table(jobs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """One row per job: its parameters, final score and diagnosis id; and the parameters that vary."""
    rows = []
    for _, job in jobs.iterrows():
        params = frames.parse_overrides(job["overrides"])
        diagnosis = "?" if job["mystery"] else frames.worst_finding(job["findings"])
        rows.append({"run": job["label"], "job": job["job"], **params,
                     "score": frames.final_score(data.metrics_frame(job["run"])), "diagnosis": diagnosis,
                     "status": job["status"]})
    table = pd.DataFrame(rows)
    fixed = {"run", "job", "score", "diagnosis", "status"}
    swept = [c for c in table.columns if c not in fixed and table[c].astype(str).nunique() > 1]
    for column in swept:
        table[column] = table[column].fillna("—").astype(str)
    return table, swept


def render() -> None:
    st.title(widgets.t("sweeps_title"))
    table, _ = widgets.runs_table()
    sweeps = sorted(s for s in table["sweep"].unique() if s)
    if not sweeps:
        st.info(widgets.t("no_sweeps"))
        return
    names = {s: str(table.loc[table["sweep"] == s, "name"].iloc[0]).rsplit("/", 1)[0] for s in sweeps}
    sweep = st.selectbox(widgets.t("pick_sweep"), sweeps[::-1], format_func=names.get, key="sweep")
    jobs = table[table["sweep"] == sweep].sort_values("job", key=lambda j: pd.to_numeric(j, errors="coerce"))
    sweep_frame, swept = sweep_table(jobs)
    st.caption(widgets.t("sweep_caption", n=len(jobs), params=", ".join(swept) or NONE))
    st.button(widgets.t("show_sweep"), on_click=widgets.set_runs, args=(list(jobs["run"]),), key="show_sweep")
    if not swept:
        st.info(widgets.t("no_swept"))
        return
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
    st.vega_lite_chart(spec=charts.to_spec(heat), width="stretch")
    st.subheader(widgets.t("parallel"))
    score_axis = widgets.t("by_score")
    dims = [*swept, score_axis]
    long = frames.parallel_long(sweep_frame.assign(**{score_axis: sweep_frame["score"].round(4)}), dims)
    chart = charts.parallel_chart(long, dims, by=by, score_title=widgets.t("by_score"))
    st.vega_lite_chart(spec=charts.to_spec(chart), width="stretch")
    st.dataframe(sweep_frame, hide_index=True, width="stretch", key="sweep_table")


if __name__ == "__main__":
    render()
