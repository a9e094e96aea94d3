"""Workshop: an exercise's worksheet beside its mystery run, and the whole exercise without a terminal.

Start trains the mystery run, Check submits a diagnosis (a catalogue id) and, once it is right, a fix; both are
`python -m playground.exercise` subprocesses with this explorer's workshop root (`--runs`), so the command line and
the page share one progress file. Hints come one at a time from the same progress (`playground.teach.workshop`). The
run's findings stay hidden (run.json `mystery`) until the checker has accepted a diagnosis and set `solved`.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pandas as pd
import streamlit as st

from playground import PYTHON
from playground.failures import FAILURE_IDS, TITLES
from playground.teach.workshop import find, next_hint, read_progress, save_progress, workshop_root

import data
import launcher
import running
import sections
import widgets

START = f"{PYTHON} -m playground.exercise start"  # the worksheet's section that holds it is the page's Start button
VERDICTS = "workshop_verdicts"  # exercise id -> {"rc", "text"} of a check that ran now, or {"job"} of one queued
STEP_VERDICT = "{id}:last_good"  # VERDICTS' key of an exercise's last-good-step check


def on_page(markdown: str) -> str:
    """The worksheet as this page shows it: its headings two levels down, under the page's own title, and without
    the section that gets the run (`exercise start`, then "go to Workshop"): the page's own Start does that."""
    sections: list[list[str]] = []
    current: list[str] = []
    for line in markdown.splitlines():
        if line.startswith("## ") and current:
            sections.append(current)
            current = []
        current.append(line)
    sections.append(current)
    kept = [line for section in sections if not any(START in line for line in section) for line in section]
    return "\n".join("##" + line if line.startswith("#") else line for line in kept)


def show_worksheet(markdown: str) -> None:
    """The worksheet's text as Markdown and each fenced block as a code block that wraps at its spaces: in the page's
    narrow column, Markdown's own code block does not wrap and cut the `check` command off at its edge."""
    text: list[str] = []
    block: list[str] | None = None
    language = ""
    for line in markdown.splitlines():
        if line.startswith("```"):
            if block is None:  # a fence opens: the text so far first
                if "\n".join(text).strip():
                    st.markdown("\n".join(text))
                text, block, language = [], [], line[3:].strip() or "text"
            else:
                st.code("\n".join(block), language=language, wrap_lines=True)
                block = None
        elif block is not None:
            block.append(line)
        else:
            text.append(line)
    if block is not None:  # an unclosed fence: shown as it is
        text += ["```" + language, *block]
    if "\n".join(text).strip():
        st.markdown("\n".join(text))


def _more_hints(exercise_id: str) -> None:
    ex = find(exercise_id)
    progress = read_progress(ex)
    next_hint(ex, progress, "hints", widgets.lang())  # counts the hint, as `playground.exercise hint` does
    save_progress(ex, progress)


def _hints(ex: dict) -> None:
    st.subheader(widgets.t("workshop_hints"))
    shown = int(read_progress(find(ex["id"])).get("hints", 0))
    for k, hint in enumerate(ex["hints"][:shown], start=1):
        st.info(widgets.t("workshop_hint", k=k, n=len(ex["hints"]), text=widgets.pick(hint)))
    if shown < len(ex["hints"]):
        st.button(widgets.t("workshop_next_hint"), on_click=_more_hints, args=(ex["id"],), key="workshop_hint")
    else:
        st.caption(widgets.t("workshop_no_hints"))


def _folder(ex: dict) -> Path:
    return workshop_root().resolve() / ex["id"]


def _fix_runs(ex: dict) -> list[str]:
    """The exercise's fix runs, oldest first (`check --fix` trains each into `fix-N`)."""
    runs = [p for p in _folder(ex).glob("fix-*") if p.is_dir()]
    return [str(p) for p in sorted(runs, key=lambda p: p.stat().st_mtime)]


# ---- actions (callbacks) ----

def _start(ex: dict) -> None:
    folder = _folder(ex)
    argv = launcher.exercise_argv(["start", str(ex["number"])], widgets.lang())
    launcher.shared().submit("start", f"{ex['number']:02d} · start", argv, Path(ex["run"]), folder / "start.log")


def _check(ex: dict) -> None:
    """Check the chosen diagnosis now, or queue the check with a fix (it trains the fix run)."""
    verdicts = st.session_state.setdefault(VERDICTS, {})
    diagnosis = st.session_state.get("workshop_diagnosis")
    fix_text = st.session_state.get("workshop_fix", "").strip()
    args = ["check", str(ex["number"]), "--diagnosis", str(diagnosis)]
    try:
        if fix_text:
            args += ["--fix", shlex.join(launcher.fix_overrides(fix_text))]
            folder = _folder(ex)
            log = folder / f"check-{len(list(folder.glob('check-*.log'))) + 1}.log"
            job = launcher.shared().submit("check", f"{ex['number']:02d} · check", launcher.exercise_argv(
                args, widgets.lang()), folder, log)
            verdicts[ex["id"]] = {"job": job.id}
        else:
            rc, text = launcher.run_now(launcher.exercise_argv(args, widgets.lang()))
            verdicts[ex["id"]] = {"rc": rc, "text": text}
    except launcher.Refused as refused:
        verdicts[ex["id"]] = {"rc": 2, "text": widgets.t("not_started", why=str(refused))}
    data.list_runs.clear()  # a right diagnosis unhides the run: list it afresh


def _check_step(ex: dict) -> None:
    """Check the last good step now (`check N --last-good S`: it reads the run, trains nothing)."""
    step = st.session_state.get("workshop_last_good")
    if step is None:  # the button is disabled without a step
        return
    args = ["check", str(ex["number"]), "--last-good", str(int(step))]
    rc, text = launcher.run_now(launcher.exercise_argv(args, widgets.lang()))
    st.session_state.setdefault(VERDICTS, {})[STEP_VERDICT.format(id=ex["id"])] = {"rc": rc, "text": text}


# ---- drawing ----

def _verdict(ex: dict, key: str | None = None) -> None:
    verdict = st.session_state.get(VERDICTS, {}).get(key or ex["id"])
    if verdict is None:
        return
    if "job" in verdict:
        job = next((j for j in launcher.shared().jobs() if j.id == verdict["job"]), None)
        if job is None:
            return
        if job.active:
            st.info(widgets.t("workshop_checking", state=running.job_state(job)))
            return
        verdict = {"rc": job.returncode, "text": job.output()}
    show = {0: st.success, 1: st.warning}.get(verdict["rc"], st.error)
    lines = [line for line in verdict["text"].splitlines() if line.strip() and "%|" not in line]  # no progress bar
    show("  \n".join(lines) or widgets.t("job_done", rc=verdict["rc"]))  # the checker's lines, kept as lines


def _answer(ex: dict, row: pd.Series | None, busy: bool) -> None:
    """The diagnosis picker, the fix field, Check, and the checker's verdict."""
    st.subheader(widgets.t("workshop_answer"))
    if read_progress(find(ex["id"])).get("solved"):
        st.success(widgets.t("workshop_fixed"))
    finished = row is not None and row["status"] not in ("running", "unknown")
    if ex.get("last_good"):  # the step the run turned: asked first, the diagnosis unhides the doctor's
        st.number_input(widgets.t("workshop_last_good"), min_value=1, value=None, step=1, key="workshop_last_good",
                        placeholder=widgets.t("workshop_last_good_hint"), help=widgets.t("workshop_last_good_help"))
        st.button(widgets.t("workshop_check_step"), key="workshop_submit_step", on_click=_check_step, args=(ex,),
                  disabled=busy or not finished or st.session_state.get("workshop_last_good") is None)
        _verdict(ex, STEP_VERDICT.format(id=ex["id"]))
    titles = {fid: f"{fid} · {TITLES[fid][widgets.lang()]}" for fid in FAILURE_IDS}
    st.selectbox(widgets.t("workshop_diagnosis"), FAILURE_IDS, index=None, format_func=widgets.label_of(titles),
                 key="workshop_diagnosis", placeholder=widgets.t("workshop_diagnosis_hint"))
    st.text_input(widgets.t("workshop_fix"), key="workshop_fix", placeholder="actor_rollout_ref.actor.optim.lr=…",
                  help=widgets.t("workshop_fix_help"))
    st.button(widgets.t("workshop_check"), key="workshop_submit", on_click=_check, args=(ex,), type="primary",
              disabled=busy or not finished or st.session_state.get("workshop_diagnosis") is None)
    _verdict(ex)
    with st.expander(widgets.t("workshop_terminal")):
        st.code("\n".join([ex["check_step"], ex["check"]]) if ex.get("last_good") else ex["check"], language="bash",
                wrap_lines=True)


def _run_rows(ex: dict, table: pd.DataFrame) -> pd.DataFrame | None:
    """The mystery run as a one-row runs table: from the run list, or read directly when outside the roots."""
    rows = table[table["run"] == ex["run"]]
    if rows.empty and Path(ex["run"]).is_dir():
        rows = data.run_row(ex["run"])
        rows = rows.assign(label=rows["name"])
    return None if rows.empty else rows.reset_index(drop=True)


def run_body(ex: dict) -> bool:
    """The mystery run (and the newest fix run on the same panels), read now; returns whether either trains."""
    table, _ = widgets.runs_table()
    rows = _run_rows(ex, table)
    start_job = launcher.shared().job_for(ex["run"], ("start",))
    check_job = launcher.shared().job_for(str(_folder(ex)), ("check",))
    active = any(j is not None and j.active for j in (start_job, check_job))
    running.stop_button(start_job, key="workshop_stop")
    if rows is None:
        st.info(widgets.t("workshop_starting") if active else widgets.t("no_metrics"))
        return active
    row = rows.iloc[0]
    st.markdown(f"**{row['name']}** · {widgets.status_text(row['status'])} · "
                f"{widgets.t('col_step')} {widgets.integer(row['last_step'])}")
    if row["mystery"]:
        st.caption(widgets.t("workshop_hidden"))
    else:
        st.success(widgets.t("workshop_solved"))
        st.markdown(widgets.badges(row["chain"]))
    listed = row["run"] in set(table["run"])
    st.button(widgets.t("workshop_show_run"), on_click=widgets.set_runs, args=([row["run"]],), key="workshop_show",
              disabled=not listed)
    if not listed:
        st.caption(widgets.t("workshop_outside", path=str(Path(row["run"]).parent.parent)))
    fixes = _fix_runs(ex)
    shown = rows
    if fixes:
        st.caption(widgets.t("workshop_fix_run", name=Path(fixes[-1]).name))
        shown = pd.concat([rows, sections.run_rows(fixes[-1:])], ignore_index=True)
    sections.draw_run_panels(shown, grouped=False, choice="recommended", key="workshop")
    return active or running.run_active(ex["run"]) or bool(fixes and running.run_active(fixes[-1]))


def _run(ex: dict) -> None:
    table, _ = widgets.runs_table()
    rows = _run_rows(ex, table)
    start_job = launcher.shared().job_for(ex["run"], ("start",))
    starting = start_job is not None and start_job.active
    if rows is None and not starting:
        st.info(widgets.t("workshop_not_started"))
        st.button(widgets.t("workshop_start"), key="workshop_start", on_click=_start, args=(ex,), type="primary",
                  icon=":material/play_arrow:")
        st.caption(widgets.t("workshop_start_terminal"))
        st.code(ex["start"], language="bash", wrap_lines=True)
        return
    busy = starting or running.run_active(ex["run"])
    _answer(ex, None if rows is None else rows.iloc[0], busy)
    if not busy:
        st.button(widgets.t("workshop_restart"), key="workshop_restart", on_click=_start, args=(ex,),
                  icon=":material/replay:", help=widgets.t("workshop_restart_help"))
    running.live_section(run_body, busy or _checking(ex), "workshop", ex)


def _checking(ex: dict) -> bool:
    job = launcher.shared().job_for(str(_folder(ex)), ("check",))
    return job is not None and job.active


def render() -> None:
    st.title(widgets.t("workshop_title"))
    exercises = {ex["number"]: ex for ex in data.exercises()}
    if not exercises:
        st.info(widgets.t("no_exercises"))
        return
    names = {n: f"{n:02d} · {widgets.pick(ex['title'])}" for n, ex in exercises.items()}
    number = st.selectbox(widgets.t("workshop_pick"), list(names), format_func=widgets.label_of(names),
                          key="workshop_exercise")
    ex = exercises[number]
    left, right = st.columns([2, 3])
    with left:
        show_worksheet(on_page(ex["worksheet"][widgets.lang()]))
        _hints(ex)
    with right:
        _run(ex)


if __name__ == "__main__":
    render()
