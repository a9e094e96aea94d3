"""Tests for the External log page's replay (`app/views/external.py`): the nearest scenario with its knobs, and the
one button that queues it in the Lab and then its fix (the processes are `fake_procs`)."""

from __future__ import annotations

import sys

from playground.config.overrides import value_of

from app_helpers import ROOT, texts
from fake_procs import run_dir_of

EXAMPLE_1 = "tests/diagnose/fixtures/guide_11_4_example1.log"
EXAMPLE_2 = "tests/diagnose/fixtures/guide_11_4_example2.log"
TRAIN = [sys.executable, "-m", "playground.train"]


def _external(app, path: str):
    at = app.run().switch_page("views/external.py").run()
    return at.text_input(key="log_path").input(path).run()


def test_the_replay_names_the_scenario_and_one_click_trains_it_then_its_fix(app, monkeypatch, spawn):
    monkeypatch.chdir(ROOT)
    at = _external(app, EXAMPLE_2)
    assert not at.exception
    assert "Replay my run" in [h.value for h in at.subheader]
    assert "scenario lr_too_high (root finding of the log: lr_too_high)" in texts(at)
    commands = [c.value for c in at.code]
    assert any(c.startswith(".venv/bin/python -m playground.train task=") and c.endswith("scenario=lr_too_high")
               for c in commands)
    assert any("actor_rollout_ref.actor.optim.lr=" in c for c in commands)  # then its fix
    at.button(key="external_replay").click().run()
    assert not at.exception
    first, fix = spawn.argvs  # the fake ends each run at once: the fix, queued after the scenario, has started
    task = value_of(first, "task")
    assert first[:3] == TRAIN and value_of(first, "scenario") == "lr_too_high"
    assert value_of(fix, "actor_rollout_ref.actor.optim.lr") is not None
    assert fix[3:-2] == first[3:-1]  # the scenario's overrides, then the fix on top
    assert run_dir_of(fix).name.endswith(f"{task}-lr_too_high-fix")
    assert at.title[0].value == "Lab"  # the page moved to the Lab, which shows the two side by side
    assert "**Before** · " + run_dir_of(first).name in texts(at)


def test_a_log_too_short_for_a_verdict_has_no_replay_button(app, monkeypatch, spawn):
    monkeypatch.chdir(ROOT)
    at = _external(app, EXAMPLE_1)
    assert not at.exception
    assert any("No replay: the log is too short" in i.value for i in at.info)
    assert not [b for b in at.button if b.key == "external_replay"] and spawn.argvs == []
