"""Learning path: the metrics guide's chapters in order (§1 actor ... §11 diagnosis), each told on the demo's runs.

A chapter: its paragraph; its metrics on the healthy demo run; a question on a knob. Once the learner has committed a
prediction, the answer, the run that breaks the metrics (on the same charts, with what each run did in numbers), a
Train button that queues the knob's run as the Lab queues its own (`launcher.py`) and draws it beside them, and, for a
token run, the token inspector at the step where it breaks. The chapters are `playground/teach/learning_path.yaml`;
the runs are `<runs folder>/demo/<name>`, where `make play` trains them.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Collection
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from playground import PYTHON
from playground.config.overrides import command, with_replaced
from playground.demo import DEMO_RUNS
from playground.metrics import STEP, fmt
from playground.rundir.runs import METRICS
from playground.teach.learning_path import Chapter, load

import charts
import data
import knobs
import lab_run
import launcher
import running
import sections
import series
import widgets

DEMO = {name: list(overrides) for name, overrides in DEMO_RUNS}
CHAPTER = "learn_chapter"
PREDICTIONS = "learn_predictions"  # section -> the option the learner committed to
MINE = "learn_runs"  # section -> the run dir its Train started
MESSAGE = "learn_message"  # (section, text): why Train did not start
LANG_SHOWN = "learn_lang_shown"
INSPECT = "inspect"  # what the token inspector opens on: {"run", "step", "focus"}
INSPECTOR = "views/inspector.py"


@functools.lru_cache(maxsize=1)
def chapters() -> tuple[Chapter, ...]:
    return tuple(load(list(DEMO)))


def demo_folder() -> Path:
    """Where `make play` trains the demo runs: `demo/` in the explorer's runs folder."""
    return launcher.runs_folder() / "demo"


def demo_run(name: str) -> Path:
    return demo_folder() / name


def trained(run: Path) -> bool:
    return (run / METRICS).is_file()


def knob_overrides(chapter: Chapter) -> list[str]:
    """The question's run: its base demo run's overrides with the knob's on top."""
    return with_replaced(DEMO[chapter.question.base], chapter.question.knob)


def my_run(chapter: Chapter) -> Path | None:
    run = st.session_state.get(MINE, {}).get(chapter.section)
    return None if run is None else Path(run)


def revealed(chapter: Chapter) -> bool:
    return chapter.section in st.session_state.get(PREDICTIONS, {})


def break_step(chapter: Chapter) -> int:
    """The step where the broken run breaks: its finding's first step (findings.json, else the diagnosis so far),
    else the run's last step."""
    run = str(demo_run(str(chapter.broken)))
    report = data.run_diagnosis(run)[0] or {}
    for finding in report.get("findings", []) or []:
        if isinstance(finding, dict) and finding.get("id") == chapter.finding and finding.get("first_step") is not None:
            return int(finding["first_step"])
    last = data.run_info(run).get("last_step")
    if last is not None:
        return int(last)
    steps = data.metrics_frame(run)[STEP].dropna()
    return int(steps.iloc[-1]) if not steps.empty else 0


def turn(chapter: Chapter) -> dict | None:
    """Where the broken run turned, for a broken run whose cause arrived mid-run (run.json's `onset_step`): the cause's
    step, the doctor's onset and finding, the last good step (None: no problem found); None for any other run."""
    if chapter.broken is None or not trained(demo_run(chapter.broken)):
        return None
    run = str(demo_run(chapter.broken))
    report = data.run_diagnosis(run)[0]
    compared = lab_run.cause_vs_onset(data.run_info(run), report)
    if compared is None:
        return None
    good = (report or {}).get("last_good")
    return {**compared, "good": good.get("step") if isinstance(good, dict) else None}


def inspect_step(chapter: Chapter) -> int:
    """The step the inspector opens at: the doctor's onset where the broken run's cause arrived mid-run (the step
    where it turned), else where its finding broke it (`break_step`)."""
    turned = turn(chapter)
    return int(turned["onset"]) if turned and turned["onset"] is not None else break_step(chapter)


def summary(frame: pd.DataFrame, metric: str) -> tuple[float, float, float] | None:
    """A metric's first and last finite values in a run, and its median; None when the run does not log it."""
    if metric not in frame:
        return None
    values = pd.to_numeric(frame[metric], errors="coerce").to_numpy(dtype=float)
    values = values[np.isfinite(values)]
    return None if values.size == 0 else (float(values[0]), float(values[-1]), float(np.median(values)))


# ---- actions (callbacks) ----

def _go(section: str) -> None:
    st.session_state[CHAPTER] = section


def _commit(chapter: Chapter) -> None:
    choice = st.session_state.get(f"learn_option_{chapter.number}")
    if choice is not None:
        st.session_state.setdefault(PREDICTIONS, {})[chapter.section] = int(choice)


def _forget(chapter: Chapter) -> None:
    st.session_state.get(PREDICTIONS, {}).pop(chapter.section, None)
    st.session_state.pop(f"learn_option_{chapter.number}", None)


def _train(chapter: Chapter) -> None:
    """Queue the question's run with the Lab's checks: the overrides the Lab may pass, a config that validates."""
    try:
        overrides = lab_run.checked(knob_overrides(chapter))
        error = knobs.check(tuple(overrides)).error
        if error:
            raise launcher.Refused(error)
        run_dir = launcher.new_folder("learn", f"s{chapter.number}-{chapter.question.base}")
        argv = launcher.train_argv(overrides, run_dir)
        launcher.shared().submit("train", run_dir.name, argv, run_dir, run_dir / "console.log")
    except launcher.Refused as refused:
        st.session_state[MESSAGE] = (chapter.section, widgets.t("not_started", why=str(refused)))
        return
    st.session_state.setdefault(MINE, {})[chapter.section] = str(run_dir)


# ---- drawing ----

def _keep_choices_across_languages() -> None:
    """A pending prediction survives a language switch: set again, its radio sends its new label (as the sidebar
    does for its own translated choices)."""
    if st.session_state.get(LANG_SHOWN, widgets.lang()) != widgets.lang():
        for key in [k for k in st.session_state if str(k).startswith("learn_option_")]:
            st.session_state[key] = st.session_state[key]
    st.session_state[LANG_SHOWN] = widgets.lang()


def _shown(chapter: Chapter) -> dict[str, Path]:
    """Legend label -> run dir of the runs the charts draw, in their colour order: healthy, broken, the learner's."""
    runs = {widgets.t("learn_label_healthy", name=chapter.healthy): demo_run(chapter.healthy)}
    if chapter.broken is not None and revealed(chapter):
        runs[widgets.t("learn_label_broken", name=chapter.broken)] = demo_run(chapter.broken)
    mine = my_run(chapter)
    if mine is not None:
        runs[widgets.t("learn_label_yours", name=mine.name)] = mine
    return runs


def _missing(chapter: Chapter) -> None:
    """The chapter's demo runs not trained yet, each with its command, and the demo's command for all of them."""
    names = [name for name in chapter.runs if not trained(demo_run(name))
             and (name == chapter.healthy or revealed(chapter))]
    if not names:
        return
    folder = launcher.shown_path(demo_folder())
    st.info(widgets.t("learn_missing", folder=folder, names=", ".join(names)))
    for name in names:
        st.code(command([*DEMO[name], f"hydra.run.dir={launcher.shown_path(demo_run(name))}"]), language="bash",
                wrap_lines=True)
    st.code(f"{PYTHON} -m playground.demo --no-explorer --runs {folder}", language="bash", wrap_lines=True)


def _marks(chapter: Chapter, labels: Collection[str]) -> tuple[tuple[str, int, str, str], ...]:
    """The broken run's rules once shown: where the doctor saw its first problem begin, and where its cause arrived
    (a cause that arrived mid-run)."""
    label = widgets.t("learn_label_broken", name=chapter.broken)
    if chapter.broken is None or label not in labels:
        return ()
    run = str(demo_run(chapter.broken))
    marks = []
    if onset := widgets.onset_of(data.run_diagnosis(run)[0]):
        marks.append((label, onset[0], widgets.t("onset_mark", step=onset[0], finding=onset[1]), "onset"))
    if (cause := data.run_info(run).get("onset_step")) is not None:
        marks.append((label, int(cause), widgets.t("cause_mark", step=int(cause)), "cause"))
    return tuple(marks)


def _chart(chapter: Chapter, frames: dict[str, pd.DataFrame], metric: str, family: str | None) -> bool:
    """One metric for the shown runs with the guide's healthy band and the broken run's rules; False when no run
    logs it."""
    _, weight, _ = widgets.settings()
    long = series.metric_long(frames, metric, weight=weight)
    if long.empty:
        return False
    onsets = sections.onset_marks(long, _marks(chapter, frames))
    long = long.rename(columns={"run": "series"})
    chart = charts.metric_chart(long, metric, bands=series.ok_bands(metric, *sections.data_range(long), family=family),
                                x_title=widgets.t("x_step"), smoothed=weight > 0, order=list(frames), onsets=onsets)
    with st.container(key=sections.chart_key(f"learn{chapter.number}", metric)):
        st.vega_lite_chart(spec=charts.to_spec(chart), width="stretch")
    return True


def runs_body(chapter: Chapter) -> bool:
    """The chapter's charts over the runs trained so far, read now (the live fragment's body); whether any trains."""
    shown = {label: run for label, run in _shown(chapter).items() if trained(run)}
    mine = my_run(chapter)
    if mine is not None:
        st.markdown(lab_run.status_line(str(mine)))
        running.stop_button(launcher.shared().job_for(mine, ("train",)), key=f"learn_stop_{chapter.number}")
    frames = {label: data.metrics_frame(str(run)) for label, run in shown.items()}
    families = {data.run_info(str(run)).get("family") for run in shown.values()}
    family = families.pop() if len(families) == 1 else None
    cells = st.columns(2)
    for i, metric in enumerate(chapter.metrics):
        with cells[i % 2]:
            if not _chart(chapter, frames, metric, family):
                st.caption(widgets.t("learn_metric_absent", metric=metric))
    return (any(running.run_active(run) for run in shown.values())
            or (mine is not None and running.run_active(mine, ("train",))))


def _what_the_runs_did(chapter: Chapter) -> None:
    """Each run's numbers for each metric, and where the diagnosis found the broken run's finding."""
    st.subheader(widgets.t("learn_runs_did"))
    lines = []
    for label, run in _shown(chapter).items():
        if not trained(run):
            continue
        frame = data.metrics_frame(str(run))
        for metric in chapter.metrics:
            found = summary(frame, metric)
            lines.append(widgets.t("learn_not_logged", run=label, metric=metric) if found is None else widgets.t(
                "learn_did", run=label, metric=metric, first=fmt(found[0]), last=fmt(found[1]), median=fmt(found[2])))
    if chapter.broken is not None and trained(demo_run(chapter.broken)):
        report = data.run_diagnosis(str(demo_run(chapter.broken)))[0] or {}
        ids = {f.get("id") for f in report.get("findings", []) or [] if isinstance(f, dict)}
        lines.append(widgets.t("learn_found", id=chapter.finding, run=chapter.broken, step=break_step(chapter))
                     if chapter.finding in ids else widgets.t("learn_not_found", id=chapter.finding,
                                                                run=chapter.broken))
    st.markdown("\n".join(f"- {line}" for line in lines))


def _train_section(chapter: Chapter) -> None:
    st.markdown(widgets.t("learn_train_intro", base=chapter.question.base,
                          folder=launcher.shown_path(launcher.runs_folder() / "learn")))
    st.code(launcher.shown_command([sys.executable, *launcher.TRAIN, *knob_overrides(chapter)]), language="bash",
            wrap_lines=True)
    message = st.session_state.get(MESSAGE)
    if message and message[0] == chapter.section:
        st.error(st.session_state.pop(MESSAGE)[1])
    mine = my_run(chapter)
    st.button(widgets.t("learn_train"), key=f"learn_train_{chapter.number}", on_click=_train, args=(chapter,),
              type="primary", icon=":material/play_arrow:",
              disabled=mine is not None and running.run_active(mine, ("train",)))


def _turn_section(chapter: Chapter) -> None:
    """Where a broken run whose cause arrived mid-run turned: the cause's step, the doctor's onset, the last good
    step (the rules on the charts)."""
    turned = turn(chapter)
    if turned is None:
        return
    st.subheader(widgets.t("learn_turn_title"))
    with st.container(key=f"learn_turn_{chapter.number}"):
        st.markdown(widgets.t("learn_turn_cause", run=chapter.broken, step=turned["step"]))
        if turned["onset"] is None:
            st.markdown(widgets.t("learn_turn_none"))
        else:
            st.markdown(widgets.t("learn_turn_onset", onset=turned["onset"], finding=turned["finding"],
                                  good=turned["good"] if turned["good"] is not None else "—"))


def _inspect_section(chapter: Chapter) -> None:
    """The token inspector at the step where the broken run breaks, or turned (token runs only)."""
    if chapter.inspect is None or chapter.broken is None or not trained(demo_run(chapter.broken)):
        return
    target = {"run": str(demo_run(chapter.broken)), "step": inspect_step(chapter), "focus": chapter.inspect}
    turned = turn(chapter)
    if turned and turned["onset"] is not None:  # the inspector says whose onset it opened at
        target["finding"] = turned["finding"]
    st.caption(widgets.t("learn_inspect_where", run=chapter.broken, step=target["step"], focus=chapter.inspect))
    if st.button(widgets.t("learn_inspect"), key=f"learn_inspect_{chapter.number}", icon=":material/search:"):
        st.session_state[INSPECT] = target
        widgets.switch_page(INSPECTOR)


def _question(chapter: Chapter) -> None:
    """The prediction, then once committed: the answer, what the runs did, Train, and the inspector."""
    question = chapter.question
    st.subheader(widgets.t("learn_question"))
    st.markdown(widgets.pick(question.text))
    labels = {i: widgets.pick(option.text) for i, option in enumerate(question.options)}
    committed = st.session_state.get(PREDICTIONS, {}).get(chapter.section)
    if committed is None:
        key = f"learn_option_{chapter.number}"
        st.radio(widgets.t("learn_prediction"), list(labels), format_func=widgets.label_of(labels), index=None, key=key)
        st.button(widgets.t("learn_commit"), key=f"learn_commit_{chapter.number}", on_click=_commit, args=(chapter,),
                  type="primary", disabled=st.session_state.get(key) is None)
        return
    if committed == question.right:
        st.success(widgets.t("learn_right", answer=labels[question.right]))
    else:
        st.warning(widgets.t("learn_wrong", yours=labels[committed], answer=labels[question.right]))
    st.markdown(widgets.pick(question.answer))
    st.button(widgets.t("learn_again"), key=f"learn_again_{chapter.number}", on_click=_forget, args=(chapter,))
    _what_the_runs_did(chapter)
    _turn_section(chapter)
    _train_section(chapter)
    _inspect_section(chapter)


def _neighbours(chapter: Chapter, order: list[str]) -> None:
    at = order.index(chapter.section)
    left, right = st.columns(2)
    if at > 0:
        left.button(widgets.t("learn_prev", section=order[at - 1]), key="learn_prev", on_click=_go,
                    args=(order[at - 1],), icon=":material/arrow_back:")
    if at < len(order) - 1:
        right.button(widgets.t("learn_next", section=order[at + 1]), key="learn_next", on_click=_go,
                     args=(order[at + 1],), icon=":material/arrow_forward:")


def render() -> None:
    st.title(widgets.t("learn_title"))
    st.caption(widgets.t("learn_caption", folder=launcher.shown_path(demo_folder())))
    _keep_choices_across_languages()
    by_section = {chapter.section: chapter for chapter in chapters()}
    order = list(by_section)
    section = widgets.picked(st.radio(widgets.t("learn_chapter"), order, horizontal=True, key=CHAPTER))
    chapter = by_section[section]
    st.header(f"{chapter.section} · {widgets.pick(chapter.title)}")
    st.markdown(widgets.pick(chapter.paragraph))
    _missing(chapter)
    if chapter.broken is None:
        st.caption(widgets.t("learn_no_broken"))
    elif not revealed(chapter):
        st.caption(widgets.t("learn_broken_hidden"))
    shown = _shown(chapter).values()
    mine = my_run(chapter)
    active = any(running.run_active(run) for run in shown) or (mine is not None and running.run_active(mine))
    running.live_section(runs_body, active, "learn", chapter)
    _question(chapter)
    _neighbours(chapter, order)


if __name__ == "__main__":
    render()
