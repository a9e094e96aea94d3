"""The Sweeps page's New sweep: one or two of the Lab's knobs over a few values (and seeds), around a scenario.

Every combination is checked by the validator before anything starts; the sweep is one Hydra multirun with the
batched launcher (`launcher.sweep_argv`) into `<runs folder>/multirun/`, so the page maps it as its runs train.
"""

from __future__ import annotations

import itertools
import math
import sys
from typing import Any

import streamlit as st

import knobs
import launcher
import widgets

MAX_JOBS = 32  # a laptop's worth: 4 x 4 values x 2 seeds
NONE = "(none)"
PENDING = "sweep_pending"  # the sweep dir just started, selected once it is listed
MESSAGE = "sweep_message"
NOT_SWEPT = ("steps", "seed")  # their own fields


def _values_around(knob: knobs.Knob, value: Any) -> str:
    """A first guess at values to sweep: a decade either side of a rate, half and double a count."""
    if knob.kind == "bool":
        return "false, true"
    if knob.kind == "choice":
        return ", ".join(knob.options)
    if knob.kind == "int":
        v = int(value or 1)
        return ", ".join(str(x) for x in dict.fromkeys([max(1, v // 2), v, v * 2]))
    rate = float(value or 0.0)
    if rate == 0:
        return "0, 0.01, 0.1"
    return ", ".join(f"{x:g}" for x in (rate / 10, rate, rate * 10))


def _config() -> knobs.Checked:
    return knobs.scenario_config(st.session_state["sweep_task"], st.session_state["sweep_scenario"])


def _on_knob(n: int) -> None:
    name = st.session_state[f"sweep_knob_{n}"]
    if name in knobs.BY_NAME:
        knob = knobs.BY_NAME[name]
        st.session_state[f"sweep_values_{n}"] = _values_around(knob, _config().value(knob))


def _on_task() -> None:
    task = st.session_state["sweep_task"]
    st.session_state["sweep_scenario"] = knobs.scenario_of(task).scenario or "healthy"
    st.session_state["sweep_steps"] = int(_config().value(knobs.BY_NAME["steps"]) or 1)
    for n in (1, 2):
        _on_knob(n)


def _init() -> None:
    if "sweep_task" not in st.session_state:
        st.session_state["sweep_task"] = st.session_state.get("lab_task", "cartpole")
        st.session_state["sweep_knob_1"], st.session_state["sweep_knob_2"] = "actor_lr", NONE
        st.session_state["sweep_seeds"] = "1"
        _on_task()


def plan() -> tuple[list[str], dict[str, list[str]], str | None]:
    """(base overrides, swept key -> values, None) from the fields, or the first reason it cannot start."""
    task, scenario = st.session_state["sweep_task"], st.session_state["sweep_scenario"]
    base = [f"task={task}", f"scenario={scenario}", f"trainer.total_training_steps={st.session_state['sweep_steps']}"]
    params: dict[str, list[str]] = {}
    try:
        for n in (1, 2):
            name = st.session_state.get(f"sweep_knob_{n}", NONE)
            if name == NONE:
                continue
            knob = knobs.BY_NAME[name]
            raw = [v for v in st.session_state.get(f"sweep_values_{n}", "").split(",") if v.strip()]
            values = list(dict.fromkeys(knobs.text(knobs.parse(knob, v)) for v in raw))
            if not values:
                raise ValueError(widgets.t("sweep_no_values", key=knob.key))
            params[knob.key] = values
        seeds = [knobs.text(knobs.parse(knobs.BY_NAME["seed"], s))
                 for s in st.session_state.get("sweep_seeds", "").split(",") if s.strip()] or ["1"]
    except ValueError as bad:
        return base, params, str(bad)
    if not params:
        return base, params, widgets.t("sweep_no_knob")
    jobs = math.prod(len(v) for v in params.values()) * len(seeds)
    if jobs > MAX_JOBS:
        return base, params, widgets.t("sweep_too_big", n=jobs, max=MAX_JOBS)
    for combo in itertools.product(*params.values()):  # each config the sweep would run, checked before it starts
        overrides = [*base, *(f"{k}={v}" for k, v in zip(params, combo))]
        error = knobs.check(tuple(overrides)).error
        if error:
            return base, params, error
    params["trainer.seed"] = seeds
    return base, params, None


def _start() -> None:
    base, params, error = plan()
    try:
        if error:
            raise launcher.Refused(error)
        base = launcher.check_overrides(base, knobs.PAGE_KEYS)
        names = "-".join(knobs.BY_KEY[k].name for k in params if k in knobs.BY_KEY and k != "trainer.seed")
        sweep_dir = launcher.new_folder("multirun", f"{st.session_state['sweep_task']}-{names}")
        argv = launcher.sweep_argv(base, params, sweep_dir)
        launcher.shared().submit("sweep", sweep_dir.name, argv, sweep_dir, sweep_dir / "console.log")
    except launcher.Refused as refused:
        st.session_state[MESSAGE] = widgets.t("not_started", why=str(refused))
        return
    st.session_state[PENDING] = str(sweep_dir)


def form() -> None:
    """The New sweep fields and the Sweep button."""
    _init()
    c1, c2, c3 = st.columns(3)
    c1.selectbox(widgets.t("lab_task"), knobs.tasks(), key="sweep_task", on_change=_on_task)
    c2.selectbox(widgets.t("lab_scenario"), list(knobs.scenario_of(st.session_state["sweep_task"]).scenarios),
                 key="sweep_scenario")
    c3.number_input(widgets.t("knob_steps"), step=1, key="sweep_steps")
    names = [k.name for k in knobs.shown_knobs(_config().family) if k.name not in NOT_SWEPT]
    labels = {NONE: widgets.t("sweep_none"), **{n: widgets.t(f"knob_{n}") for n in names}}
    for n, options in ((1, names), (2, [NONE, *names])):
        left, right = st.columns([1, 2])
        left.selectbox(widgets.t("sweep_knob", n=n), options, format_func=widgets.label_of(labels),
                       key=f"sweep_knob_{n}", on_change=_on_knob, args=(n,))
        right.text_input(widgets.t("sweep_values"), key=f"sweep_values_{n}",
                         disabled=st.session_state.get(f"sweep_knob_{n}") == NONE)
    st.text_input(widgets.t("sweep_seeds"), key="sweep_seeds")
    base, params, error = plan()
    if error:
        st.error(error, icon=":material/error:")
    else:
        st.caption(widgets.t("sweep_jobs", n=math.prod(len(v) for v in params.values())))
    message = st.session_state.pop(MESSAGE, None)
    if message:
        st.error(message)
    st.button(widgets.t("sweep_start"), key="sweep_start", on_click=_start, type="primary",
              icon=":material/grid_on:")
    if not error:
        swept = [f"{k}={','.join(v)}" for k, v in params.items()]
        st.caption(widgets.t("sweep_command"))
        st.code(launcher.shown_command([sys.executable, *launcher.TRAIN, "-m", *launcher.SWEEP, *base, *swept]),
                language="bash", wrap_lines=True)
