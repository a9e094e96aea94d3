"""External logs: a verl console log (path, upload or pasted text) drawn and diagnosed like a run, and replayed: the
playground scenario nearest to its diagnosis (`playground.diagnose.replay`), which one button trains in the Lab and
then its fix (two `python -m playground.train` runs through the Lab's launcher, the second queued after the first).
A log given by its path can be followed: the page reads it again every few seconds while a run writes it, as
`python -m playground.diagnose LOG --follow` does in a terminal. A rollout dump dir (verl's
`trainer.rollout_data_dir`), as the path or beside the log, adds what its text shows, each finding linked to its
samples in the Step inspector (`dump_view`)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from playground.config.overrides import with_replaced
from playground.diagnose.replay import replay_read, shown_value

import data
import dump_view
import knobs
import lab_run
import launcher
import sections
import series
import widgets

REPLAY_MESSAGE = "external_replay_message"  # (kind, text) shown once: why the replay did not start
FOLLOW_EVERY_S = 3  # how often a followed log is read again


def _read_path(path: str):
    log, error = data.read_log_path(path)
    if error:
        st.error(widgets.t(error, path=path))
    return log


def _log():
    """The log chosen on this page (path, then upload, then pasted text), or None."""
    path = st.text_input(widgets.t("log_path"), key="log_path", placeholder="logs/verl_run.log")
    upload = st.file_uploader(widgets.t("log_upload"), key="log_upload", type=["log", "txt", "out", "jsonl"])
    pasted = st.text_area(widgets.t("log_paste"), key="log_paste", height=120,
                          placeholder="step:5 - actor/pg_loss:0.523 - actor/pg_clipfrac:0.850 - ...")
    if path.strip():
        return None if dump_view.is_dump_path(path) else _read_path(path)  # a dump dir: drawn by render
    if upload is not None:
        return data.read_log_text(upload.getvalue().decode("utf-8", errors="replace"), upload.name)
    if pasted.strip():
        return data.read_log_text(pasted, "pasted")
    return None


def render() -> None:
    st.title(widgets.t("external_title"))
    st.caption(widgets.t("external_caption"))
    log = _log()
    rollout_dir = st.text_input(widgets.t("log_rollout_dir"), key="log_rollout_dir", placeholder="rollout_data")
    path = st.session_state.get("log_path", "")
    dumps = [text for text in (path if dump_view.is_dump_path(path) else "", rollout_dir) if text.strip()]
    if log is not None:
        if path.strip() and st.toggle(widgets.t("log_follow"), key="log_follow",
                                      help=widgets.t("log_follow_help", s=FOLLOW_EVERY_S)):
            _followed()
        else:
            _show(log)
    for n, text in enumerate(dumps):
        dump_view.draw_findings(text, key=f"external_dump_{n}")


@st.fragment(run_every=FOLLOW_EVERY_S)
def _followed() -> None:
    """The log at the page's path, read again every few seconds (its reader's cache is keyed on the file's size and
    time, so an unchanged file costs nothing)."""
    log = _read_path(st.session_state.get("log_path", ""))
    if log is not None:
        st.caption(widgets.t("log_following", path=log.source, n=len(log.records)))
        _show(log)


def _show(log) -> None:
    """The log's panels, its diagnosis and its replay."""
    label = (log.source.rsplit("/", 1)[-1] or "log")[:40]
    widgets.show_problems(label, log.problems)
    if not log.records:
        st.info(widgets.t("no_records"))
        return
    read = "log_read_one" if len(log.records) == 1 else "log_read"
    st.success(widgets.t(read, n=len(log.records), first=log.steps[0], last=log.steps[-1], kind=log.kind))
    report, status, why = data.diagnose_records(log)
    source = sections.Source(label, (log.source, len(log.records), data.log_digest(log)), label,
                             onset=widgets.onset_of(report))  # the rule where its first problem began
    frame = series.records_frame(log.records)
    tab_panels, tab_diagnosis = st.tabs([widgets.t("nav_panels"), widgets.t("nav_diagnosis")])
    with tab_panels:
        choice = sections.panel_choice("external_choice")
        sections.draw_panels([source], {label: frame}, {label: status}, choice)
    with tab_diagnosis:
        if why:
            st.warning(widgets.t("diagnosis_failed", why=why))
        sections.draw_findings(report, None, key="external")
    if report is not None:
        draw_replay(_replay(log, report, (log.source, data.log_digest(log))))


@st.cache_data(max_entries=16, show_spinner=False)
def _replay(_log, _report: dict, key: tuple) -> dict:
    """The log's replay, once per log (`key`: its source and digest): it diagnoses the log once per set of facts."""
    return replay_read(_log, _report)


def _replay_in_lab(found: dict) -> bool:
    """Queue the scenario's run in the Lab (its short run where it has one, as the Lab's Train would), then the same
    with its fix, compared with it; the Lab's fields show the scenario. Returns whether both were queued."""
    task, scenario = found["task"], found["scenario"]
    short = knobs.lab_config(task, scenario)
    overrides = knobs.overrides_for(task, scenario, {k.name: short.value(k) for k in knobs.KNOBS})
    try:
        fix_items = launcher.fix_overrides(found["fix"]) if found["fix"] else []
    except launcher.Refused as refused:
        st.session_state[REPLAY_MESSAGE] = widgets.t("not_started", why=str(refused))
        return False
    if not lab_run.start(overrides, f"{task}-{scenario}"):
        return False
    lab_run.load_form(overrides)
    if fix_items:
        base = st.session_state[lab_run.VIEW]["run"]
        return lab_run.start(with_replaced(overrides, fix_items), f"{task}-{scenario}-fix", base=base)
    return True


def draw_replay(found: dict) -> None:
    """The replay block: the scenario, its knobs beside the log's, the commands, why this one, and the button."""
    st.subheader(widgets.t("replay_title"))
    lang = widgets.lang()
    if found["status"] == "none":
        st.info(found["why"].get(lang, ""))
        return
    st.markdown(widgets.t("replay_scenario", task=found["task"], scenario=found["scenario"], root=found["root"]))
    match = {True: "=", False: "≠", None: ""}
    rows = [{widgets.t("replay_knob"): k["name"], widgets.t("replay_in_scenario"): shown_value(k["scenario"]),
             widgets.t("replay_in_log"): widgets.t("replay_not_in_log") if k["log"] is None else shown_value(k["log"]),
             widgets.t("replay_match"): match[k["match"]]} for k in found["knobs"]]
    st.dataframe(pd.DataFrame(rows), hide_index=True, key="external_replay_knobs")
    st.caption(widgets.t("replay_command"))
    st.code(found["command"], language="bash", wrap_lines=True)
    if found["status"] == "replay":
        st.caption(widgets.t("replay_fix_command"))
        st.code(found["fix_command"] or widgets.t("replay_no_fix"), language="bash", wrap_lines=True)
    st.caption(f"{widgets.t('replay_why')} {found['why'].get(lang, '')}")
    for caveat in found["caveats"]:
        st.warning(caveat.get(lang, ""), icon=":material/info:")
    message = st.session_state.pop(REPLAY_MESSAGE, None) or st.session_state.pop(lab_run.MESSAGE, (None, None))[1]
    if message:
        st.error(message)
    label = "replay_button" if found["status"] == "replay" and found["fix"] else "replay_button_alone"
    if st.button(widgets.t(label), key="external_replay", help=widgets.t("replay_button_help"), type="primary",
                 icon=":material/replay:"):
        if _replay_in_lab(found):
            widgets.switch_page("views/lab.py")
        st.rerun()


if __name__ == "__main__":
    render()
