"""Lab: pick a task and a scenario, turn the knobs the guide talks about, press Train, watch the run break, fix it.

The fields start at the scenario's values, with the task's tuned defaults beside them. The overrides are checked by
`playground.config.validate` as the command line checks them (its one line shows next to the field) before Train
queues `python -m playground.train` (`launcher.py`); the run's panels and diagnosis grow live beside the form.
"""

from __future__ import annotations

import sys
from typing import Any

import streamlit as st

import knobs
import lab_run
import launcher
import running
import widgets

EXTRA = "lab_extra"  # overrides an applied fix set that no field shows (e.g. algorithm.norm_adv=True)


def _default_scenario(task: str) -> str:
    return knobs.scenario_of(task).scenario or "healthy"


def _typed(knob: knobs.Knob, value: Any) -> object:
    if value is None or knob.kind in ("bool", "choice"):
        return value
    return int(value) if knob.kind == "int" else float(value)


def _load_scenario() -> None:
    """Fill every field with the chosen scenario's values, with its short run's on top (a callback: before the fields
    are drawn)."""
    task, scenario = st.session_state["lab_task"], st.session_state.get("lab_scenario")
    if scenario not in knobs.scenario_of(task).scenarios:
        scenario = _default_scenario(task)
    config = knobs.lab_config(task, scenario)  # composed before any field is written: the slow part
    st.session_state["lab_scenario"] = scenario
    for knob in knobs.KNOBS:
        st.session_state[f"knob_{knob.name}"] = _typed(knob, config.value(knob))
    st.session_state[EXTRA] = []


def _on_task() -> None:
    st.session_state["lab_scenario"] = _default_scenario(st.session_state["lab_task"])
    _load_scenario()


def _load(overrides: list[str]) -> None:
    """The fields of a run's config (knobs; other overrides kept as applied fixes), before the fields are drawn."""
    task, scenario, values, extra = knobs.form_from(overrides)
    fallback = knobs.scenario_config(task, scenario)  # composed before any field is written
    st.session_state["lab_task"], st.session_state["lab_scenario"] = task, scenario
    for knob in knobs.KNOBS:
        value = values.get(knob.name)
        st.session_state[f"knob_{knob.name}"] = _typed(knob, fallback.value(knob) if value is None else value)
    st.session_state[EXTRA] = extra


def _set_up() -> bool:
    """Whether every field the form draws holds a value (the task, the scenario, each of the task's knobs)."""
    task = st.session_state.get("lab_task")
    if task not in knobs.tasks():
        return False
    keys = ["lab_scenario", *(f"knob_{k.name}" for k in knobs.shown_knobs(knobs.scenario_of(task).family))]
    return all(key in st.session_state for key in keys)


def _init() -> None:
    """Give the fields their values before they are drawn: an applied fix's, else, when any field has none, the
    shown Lab run's config or the task's default scenario.

    Every read or write of session state lets Streamlit stop the run for a rerun the browser asked for, and the
    first run after start-up, slow while nothing is composed yet, could stop here after setting the task and before
    the knobs: when the task alone said "set up", the next run drew each knob at its widget default, 0, under the
    right "task default". So set-up is judged on every field, and a cut-short one is done again whole."""
    if lab_run.LOAD in st.session_state:
        _load(st.session_state.pop(lab_run.LOAD))
    elif not _set_up():
        if view := lab_run.current_view():
            _load(lab_run.run_overrides(view["run"]))  # the run shown, with its own config in the fields
            return
        tasks, task = knobs.tasks(), st.session_state.get("lab_task")
        st.session_state["lab_task"] = task if task in tasks else "cartpole" if "cartpole" in tasks else tasks[0]
        _load_scenario()  # the task's default scenario unless one of its own is already chosen


def _disabled(knob: knobs.Knob, config: knobs.Checked) -> bool:
    if knob.needs == "critic":
        return not config.critic
    return knob.needs is not None and not st.session_state.get(f"knob_{knob.needs}")


def form_overrides() -> tuple[list[str], knobs.Checked]:
    """The overrides the fields say now (from session state), and their check."""
    task, scenario = st.session_state["lab_task"], st.session_state["lab_scenario"]
    config = knobs.scenario_config(task, scenario)
    chosen = {k.name: st.session_state.get(f"knob_{k.name}") for k in knobs.shown_knobs(config.family)
              if not _disabled(k, config)}
    overrides = knobs.overrides_for(task, scenario, chosen, st.session_state.get(EXTRA, []))
    return overrides, knobs.check(tuple(overrides))


def _train() -> None:
    overrides, _ = form_overrides()
    name = f"{st.session_state['lab_task']}-{st.session_state['lab_scenario']}"
    lab_run.start(overrides, name)


def _clear_extra() -> None:
    st.session_state[EXTRA] = []


def _field(knob: knobs.Knob, config: knobs.Checked, defaults: knobs.Checked, error: str | None) -> None:
    key, label = f"knob_{knob.name}", widgets.t(f"knob_{knob.name}")
    disabled, help_text = _disabled(knob, config), f"`{knob.key}`"
    if knob.kind == "bool":
        st.toggle(label, key=key, help=help_text)
    elif knob.kind == "choice":
        st.selectbox(label, knob.options, key=key, help=help_text)
    elif knob.kind == "int":
        st.number_input(label, step=1, key=key, disabled=disabled, help=help_text)
    else:
        st.number_input(label, step=knob.step, format="%g", key=key, disabled=disabled, help=help_text)
    note = widgets.t("knob_default", value=knobs.text(defaults.value(knob)))
    if knob.fallback and config.values.get(knob.key) is None:
        note += " · " + widgets.t("knob_fallback", name=knob.fallback.rsplit(".", 1)[-1])
    if knob.needs == "critic" and disabled:
        note = widgets.t("knob_no_critic")
    st.caption(note)
    if error:
        st.error(error, icon=":material/error:")


def form() -> None:
    """Task, scenario, the knobs, Train, the command and the queue."""
    tasks = knobs.tasks()
    st.selectbox(widgets.t("lab_task"), tasks, key="lab_task", on_change=_on_task)
    scenarios = list(knobs.scenario_of(st.session_state["lab_task"]).scenarios)
    st.selectbox(widgets.t("lab_scenario"), scenarios, key="lab_scenario", on_change=_load_scenario)
    task, scenario = st.session_state["lab_task"], st.session_state["lab_scenario"]
    config, defaults = knobs.scenario_config(task, scenario), knobs.task_defaults(task)
    short = knobs.short_run(task, scenario)
    if short:
        set_here = knobs.lab_config(task, scenario)
        changed = [f"{widgets.t(f'knob_{k.name}')} {knobs.text(set_here.value(k))}" for k in knobs.KNOBS
                   if not knobs.same(set_here.value(k), config.value(k))]
        st.caption(widgets.t("lab_short_run", knobs=", ".join(changed), path=f"conf/{knobs.SHORT_RUN}/{short}.yaml"))
    overrides, checked = form_overrides()
    at_field = knobs.error_knob(checked.error, config.family)
    message = st.session_state.pop(lab_run.MESSAGE, None)
    if message:
        st.error(message[1])
    if checked.error and at_field is None:
        st.error(checked.error, icon=":material/error:")
    st.button(widgets.t("train"), key="lab_train", on_click=_train, type="primary", icon=":material/play_arrow:")
    st.caption(widgets.t("lab_command"))
    st.code(launcher.shown_command([sys.executable, *launcher.TRAIN, *overrides]), language="bash",
            wrap_lines=True)
    st.caption(widgets.t("lab_batch", batch=config.batch))
    cells = st.columns(2)
    for i, knob in enumerate(knobs.shown_knobs(config.family)):
        with cells[i % 2]:
            _field(knob, config, defaults, checked.error if knob.name == at_field else None)
    if st.session_state.get(EXTRA):
        st.caption(widgets.t("lab_extra", overrides=" ".join(st.session_state[EXTRA])))
        st.button(widgets.t("lab_extra_clear"), key="lab_extra_clear", on_click=_clear_extra)
    with st.expander(widgets.t("queue_title"), expanded=True):
        running.queue_section()


def render() -> None:
    st.title(widgets.t("lab_title"))
    st.caption(widgets.t("lab_caption", folder=launcher.shown_path(lab_run.lab_folder())))
    _init()
    left, right = st.columns([2, 3], gap="large")
    with left:
        form()
    with right:
        view = lab_run.current_view()
        if view is None:
            st.info(widgets.t("lab_intro"))
            return
        running.live_section(lab_run.view_body, running.run_active(view["run"], ("train",)), "lab", view)


if __name__ == "__main__":
    render()
