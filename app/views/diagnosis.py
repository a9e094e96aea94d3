"""Diagnosis: per run, the findings on a timeline, the guide's explanation and a copyable fix command."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from playground.config.overrides import fix_command

import data
import sections
import widgets


def render() -> None:
    picked = widgets.page_with_selection("diagnosis_title")
    if picked is None:
        return
    table, rows = picked
    run, row = widgets.pick_run(table, rows, key="diagnosis_run")
    st.markdown(f"**{row['name']}** · {row['task']} · {widgets.status_text(row['status'])} · "
                f"{widgets.t('col_step')} {widgets.integer(row['last_step'])}")
    if row["status"] == "running":
        st.caption(widgets.t("diagnosis_live"))
    info = data.run_info(run)
    if info.get("error") and info.get("status") == "interrupted":  # a stop, not a failure: not in red
        steps = {"step": widgets.integer(info.get("last_step")), "total": widgets.integer(info.get("total_steps"))}
        st.info(widgets.t("stopped_by_you", **steps) if data.stopped_by_you(info)
                else widgets.t("stopped_other", why=info["error"], **steps))
    elif info.get("error"):
        st.error(f"{info.get('stop_reason') or row['status']}: {info['error']}")
    report, _, why = data.run_diagnosis(run)
    if report is None:
        st.info(widgets.t("no_report"))
        if why:
            st.warning(widgets.t("diagnosis_failed", why=why))
        return
    if row["mystery"]:  # a workshop mystery: hidden until `python -m playground.exercise check` accepts a diagnosis
        st.info(widgets.t("mystery_hidden"))
        return
    for problem in report.get("problems", []) or []:
        st.warning(widgets.pick(problem))
    last_step = pd.to_numeric(row["last_step"], errors="coerce")
    sections.draw_findings(report, row["overrides"], key="diag", max_step=None if pd.isna(last_step) else last_step,
                           inspect_run=run if data.has_token_records(run) else None)
    if row["overrides"]:
        st.caption(widgets.t("rerun_caption"))
        st.code(info.get("command") or fix_command(row["overrides"], ""), language="bash", wrap_lines=True)


if __name__ == "__main__":
    render()
