"""The Lab keeps its values (issue 49) through what once lost them, without a browser: runs appearing, reruns, another
page and back, a run Streamlit stopped midway, a new session. The browser version is `tests/app/test_lab_state.py`.

A browser shows what Streamlit sends it: a widget's value when the run set it (`set_value`), else the value it holds
itself, and nothing when it holds none (a page switch, a reconnect, a reload) but the widget's default. So each field
is checked on both: its default and any value sent must be the form's (the task's default or the user's), never a
widget's own 0 or the first task, and the command must say the same.
"""

from __future__ import annotations

import sys

import pytest
from streamlit.testing.v1 import AppTest

import data
import knobs
import launcher
from app_helpers import ENTRY, texts
from fake_runs import finding, write_run

NEWEST = "09-50-00"  # the fake tree's newest run, the sidebar's at the start of a session


def _expected(seed: int | None = None) -> tuple[dict[str, object], str]:
    """CartPole healthy's fields (the user's seed when typed), and the command the Lab shows for them."""
    config = knobs.lab_config("cartpole", "healthy")
    values = {f"knob_{k.name}": config.value(k) for k in knobs.shown_knobs(config.family)}
    if seed is not None:
        values["knob_seed"] = seed
    overrides = knobs.overrides_for("cartpole", "healthy", {k.removeprefix("knob_"): v for k, v in values.items()})
    return {"lab_task": "cartpole", "lab_scenario": "healthy", **values}, launcher.shown_command(
        [sys.executable, *launcher.TRAIN, *overrides])


def _shown(widget) -> list[object]:
    """What a browser may show for a widget: its default, then the value the run sent (if it sent one)."""
    proto = widget.proto
    kind = type(widget).__name__
    if kind == "NumberInput":
        shown = [proto.default if proto.HasField("default") else None]
        return shown + [proto.value if proto.HasField("value") else None] if proto.set_value else shown
    if kind == "Selectbox":
        return [proto.options[proto.default]] + ([proto.raw_value] if proto.set_value else [])
    if kind in ("Toggle", "Checkbox"):
        return [proto.default] + ([proto.value] if proto.set_value else [])
    if kind == "Multiselect":
        return [[proto.options[i] for i in proto.default]] + ([list(proto.raw_values)] if proto.set_value else [])
    raise AssertionError(kind)


def _same(a: object, b: object) -> bool:
    return a == b if not isinstance(a, float) and not isinstance(b, float) else a == pytest.approx(b)


def _check(at, seed: int | None, where: str, run: str = NEWEST) -> None:
    """Each field and the command at CartPole healthy's values (the seed the user's), and the sidebar at `run`."""
    assert not at.exception, where
    fields, command = _expected(seed)
    widgets = {w.key: w for kind in ("number_input", "selectbox", "toggle") for w in getattr(at, kind)
               if w.key in fields}
    assert set(widgets) == set(fields), where
    for key, expected in fields.items():
        shown = _shown(widgets[key])
        assert all(_same(value, expected) for value in shown), (where, key, shown, expected)
    assert at.code[0].value == command, where
    runs = _shown(at.multiselect(key="runs"))
    assert all(len(labels) == 1 and labels[0].startswith(run) for labels in runs), (where, runs)


def test_the_labs_fields_hold_their_values_as_runs_appear_across_pages_a_stopped_run_and_a_new_session(tree):
    at = AppTest.from_file(ENTRY, default_timeout=60).run()
    _check(at, None, "a first session")
    for i in range(2):
        seed = 11 + i
        at.number_input(key="knob_seed").set_value(seed).run()
        _check(at, seed, f"round {i}: the seed typed")
        write_run(tree["healthy"].parents[1] / "2026-12-07" / f"10-00-0{i}", seed=100 + i, status="running",
                  findings=[finding("healthy", "info", 1, 60)])
        data.list_runs.clear()  # listed afresh, as after the list's few seconds of cache
        at.run()
        _check(at, seed, f"round {i}: a run appeared")
        at.switch_page("views/runs.py").run()
        assert not at.exception and "No runs shown" not in texts(at)
        # what a Lab run stopped by a rerun (the browser's) after writing the fields, before drawing them, left: the
        # values under the fields' keys (as the form had them before it was kept apart), stored by widget id
        for key, value in _expected()[0].items():
            at.session_state[key] = value
        at.run()
        at.switch_page("views/lab.py").run()
        _check(at, seed, f"round {i}: back from Runs after a stopped run")
    fresh = AppTest.from_file(ENTRY, default_timeout=60).run()  # a new session (a reload, a lost one's reconnect)
    _check(fresh, None, "a new session", run="10-00-01")  # the newest run now
