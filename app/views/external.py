"""External logs: a verl console log (path, upload or pasted text) drawn and diagnosed like a run."""

from __future__ import annotations

import streamlit as st

import data
import sections
import series
import widgets


def _log():
    """The log chosen on this page (path, then upload, then pasted text), or None."""
    path = st.text_input(widgets.t("log_path"), key="log_path", placeholder="logs/verl_run.log")
    upload = st.file_uploader(widgets.t("log_upload"), key="log_upload", type=["log", "txt", "out", "jsonl"])
    pasted = st.text_area(widgets.t("log_paste"), key="log_paste", height=120,
                          placeholder="step:5 - actor/pg_loss:0.523 - actor/pg_clipfrac:0.850 - ...")
    if path.strip():
        log, error = data.read_log_path(path)
        if error:
            st.error(widgets.t(error, path=path))
        return log
    if upload is not None:
        return data.read_log_text(upload.getvalue().decode("utf-8", errors="replace"), upload.name)
    if pasted.strip():
        return data.read_log_text(pasted, "pasted")
    return None


def render() -> None:
    st.title(widgets.t("external_title"))
    st.caption(widgets.t("external_caption"))
    log = _log()
    if log is None:
        return
    label = (log.source.rsplit("/", 1)[-1] or "log")[:40]
    widgets.show_problems(label, log.problems)
    if not log.records:
        st.info(widgets.t("no_records"))
        return
    read = "log_read_one" if len(log.records) == 1 else "log_read"
    st.success(widgets.t(read, n=len(log.records), first=log.steps[0], last=log.steps[-1], kind=log.kind))
    report, status, why = data.diagnose_records(log)
    source = sections.Source(label, (log.source, len(log.records), data.log_digest(log)), label)
    frame = series.records_frame(log.records)
    tab_panels, tab_diagnosis = st.tabs([widgets.t("nav_panels"), widgets.t("nav_diagnosis")])
    with tab_panels:
        choice = sections.panel_choice("external_choice")
        sections.draw_panels([source], {label: frame}, {label: status}, choice)
    with tab_diagnosis:
        if why:
            st.warning(widgets.t("diagnosis_failed", why=why))
        sections.draw_findings(report, None, key="external")


if __name__ == "__main__":
    render()
