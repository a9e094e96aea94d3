"""Tests for `app/views/workshop.py`: the worksheet beside the run, hints one at a time, and a mystery run that gives
nothing away on any page until `playground.exercise.check` accepts its diagnosis."""

from __future__ import annotations

import sys

import pytest
from streamlit.testing.v1 import AppTest

from playground.exercise import check
from playground.rundir.runs import read_run_info
from playground.teach.workshop import find, read_progress, save_progress

from app_helpers import ENTRY, charts_of, show, texts
from fake_runs import finding, write_last_good, write_run

EX = "01_cartpole_relapse"
ANSWER = "lr_too_high"
EVERY_ID = ("workshop_diagnosis", "lab_scenario", "sweep_scenario")


@pytest.fixture
def workshop(tmp_path, monkeypatch):
    """A workshop root under the only runs folder (no other runs: no other run may name the answer)."""
    root = tmp_path / "outputs" / "workshop"
    root.mkdir(parents=True)
    monkeypatch.setenv("PLAYGROUND_RUNS", str(tmp_path / "outputs"))
    monkeypatch.setenv("PLAYGROUND_WORKSHOP", str(root))
    return root


@pytest.fixture
def app(workshop):
    return AppTest.from_file(ENTRY, default_timeout=60)


def _mystery(root, **info):
    return write_run(root / EX / "mystery", scenario="mystery", mystery=True, unstable=True, seed=7,
                     findings=[finding(ANSWER, "warning", 5, 60, "actor_rollout_ref.actor.optim.lr=0.005")],
                     overrides=["task=cartpole", "scenario=mystery", "trainer.mystery=true",
                                "actor_rollout_ref.actor.optim.lr=0.05"], extra_info=info or None)


def _workshop(app):
    return app.run().switch_page("views/workshop.py").run()


def everything(at) -> str:
    """All the text a participant can see: messages, code, tables and the options of every picker."""
    parts = [texts(at), *(c.value for c in at.code)]
    parts += [df.value.to_string() for df in at.dataframe]
    for kind in ("selectbox", "multiselect"):  # pickers of every catalogue id or scenario give nothing away
        parts += [" ".join(map(str, w.options)) for w in getattr(at, kind) if w.key not in EVERY_ID]
    return "\n".join(parts)


def test_worksheet_in_both_languages_and_the_start_command(app, workshop):
    at = _workshop(app)
    assert not at.exception
    assert at.title[0].value == "Workshop"
    assert "The story" in texts(at) and "The pole that keeps falling again" in texts(at)
    assert ".venv/bin/python -m playground.exercise start 1" in [c.value for c in at.code]
    # on this page, the worksheet's "Get the run" (start it, then go to Workshop) is the page's own Start button
    assert "go to **Workshop**" not in texts(at) and "Get the run" not in texts(at) and "Questions" in texts(at)
    at.radio(key="lang").set_value("zh").run()
    assert at.title[0].value == "工作坊" and "背景" in texts(at)
    assert "进入 **工作坊** 页面" not in texts(at) and "问题" in texts(at)
    at.selectbox(key="workshop_exercise").set_value(7).run()
    assert "更有创意的回答" in texts(at)


def test_the_worksheets_check_command_is_shown_whole(app, workshop):
    """The worksheet's fenced blocks were Markdown code, which does not wrap: the narrow column cut `check` off."""
    at = _workshop(app)
    command = '.venv/bin/python -m playground.exercise check 1 --diagnosis <id> --fix "<key=value ...>"'
    (block,) = [c for c in at.code if c.value == command]
    assert block.proto.wrap_lines and block.language == "bash"
    assert not any("```" in m.value for m in at.markdown)  # every fence became a code block
    assert "Questions" in texts(at) and "Check your answer" in texts(at)


def test_hints_are_revealed_one_at_a_time(app, workshop):
    at = _workshop(app)
    assert "Hint 1/3" not in texts(at)
    at.button(key="workshop_hint").click().run()
    assert "Hint 1/3" in texts(at) and "Hint 2/3" not in texts(at)
    at.button(key="workshop_hint").click().run()
    at.button(key="workshop_hint").click().run()
    assert "Hint 3/3" in texts(at) and "No hints left" in texts(at)
    at.selectbox(key="workshop_exercise").set_value(2).run()  # each exercise counts its own hints
    assert "Hint 1/3" not in texts(at)


def test_mystery_run_shows_its_panels_but_not_its_answer_anywhere(app, workshop):
    run = _mystery(workshop)
    at = _workshop(app)
    assert len(charts_of(at)) >= 4  # the recommended panels of the run
    assert ".venv/bin/python -m playground.exercise check 1" in " ".join(c.value for c in at.code)
    assert ANSWER not in everything(at)
    at.button(key="workshop_show").click().run()
    assert at.multiselect(key="runs").value == [str(run)]
    for page in ("views/runs.py", "views/panels.py", "views/diagnosis.py", "views/sweeps.py", "views/samples.py"):
        at.switch_page(page).run()
        assert not at.exception, page
        assert ANSWER not in everything(at), page
        assert "actor_rollout_ref.actor.optim.lr=0.005" not in everything(at), page  # the fix command


def test_accepted_diagnosis_unhides_the_run_on_every_page(app, workshop):
    run = _mystery(workshop)
    ok, lines = check(find("1"), ANSWER, None, root=workshop)
    assert ok and "The explorer now shows this run's findings." in lines
    at = _workshop(app)
    assert "Diagnosed" in texts(at) and f":orange-badge[{ANSWER}]" in texts(at)
    at = show(at, run).switch_page("views/diagnosis.py").run()
    assert f":orange-badge[{ANSWER}]" in texts(at)


def test_a_solved_run_written_elsewhere_is_read_directly(app, tmp_path, monkeypatch):
    root = tmp_path / "elsewhere"  # not under the runs folders
    monkeypatch.setenv("PLAYGROUND_WORKSHOP", str(root))
    _mystery(root, solved=True)
    at = _workshop(app)
    assert not at.exception
    assert f":orange-badge[{ANSWER}]" in texts(at) and len(charts_of(at)) >= 4
    assert at.button(key="workshop_show").disabled and "outside the runs folders" in texts(at)


def test_start_trains_the_exercises_run_through_the_exercise_command(app, workshop, spawn):
    at = _workshop(app)
    at.button(key="workshop_start").click().run()
    (argv,) = spawn.argvs
    assert argv == [sys.executable, "-m", "playground.exercise", "--runs", str(workshop.resolve()), "--lang", "en",
                    "start", "1"]


def test_a_wrong_then_a_right_diagnosis_through_the_checker(app, workshop):
    run = _mystery(workshop)
    at = _workshop(app)
    at.selectbox(key="workshop_diagnosis").set_value("entropy_collapse").run()
    at.button(key="workshop_submit").click().run()
    assert "✗ Diagnosis: entropy_collapse is not what went wrong" in texts(at)
    assert "Hint 1/3" in texts(at)  # the checker's hint, counted in the progress the command line reads
    assert read_progress(find("1"), workshop) == {"hints": 1, "attempts": 1}
    assert ANSWER not in everything(at)
    at.selectbox(key="workshop_diagnosis").set_value(ANSWER).run()
    at.button(key="workshop_submit").click().run()
    assert f"✓ Diagnosis: {ANSWER} (learning rate too high) is right." in texts(at)
    assert f":orange-badge[{ANSWER}]" in texts(at) and read_run_info(run)["solved"]


def test_a_fix_is_checked_by_a_queued_check_and_a_bad_one_refused(app, workshop, spawn):
    _mystery(workshop)
    at = _workshop(app)
    at.selectbox(key="workshop_diagnosis").set_value(ANSWER).run()
    at.text_input(key="workshop_fix").input("hydra.run.dir=../x").run()
    at.button(key="workshop_submit").click().run()
    assert any(e.value.startswith("Not started: hydra.run.dir=../x is refused") for e in at.error)
    assert spawn.started == []
    at.text_input(key="workshop_fix").input("actor_rollout_ref.actor.optim.lr=0.005").run()
    at.button(key="workshop_submit").click().run()
    (argv,) = spawn.argvs
    assert argv[-6:] == ["check", "1", "--diagnosis", ANSWER, "--fix", "actor_rollout_ref.actor.optim.lr=0.005"]
    assert "✓ Healthy: the engine finds no warning." in [s.value for s in at.success]  # the check's own lines
    save_progress(find("1"), {"diagnosed": True, "solved": True}, workshop)  # what a passing check records
    assert "Solved: a fix of yours passed the check" in texts(at.run())


def test_the_last_good_step_is_asked_and_checked_on_the_page_where_an_exercise_asks_for_it(app, workshop):
    run = write_run(workshop / "15_cartpole_turned" / "mystery", scenario="lr_too_high", mystery=True, unstable=True,
                    steps=80, findings=[finding(ANSWER, "warning", 24, 80)], extra_info={"onset_step": 20},
                    overrides=["task=cartpole", "scenario=mystery", "trainer.mystery=true", "scenario=lr_too_high",
                               "onset_step=20"])
    write_last_good(run, 20, ANSWER, 19)
    at = _workshop(app)
    assert not any(w.key == "workshop_last_good" for w in at.number_input)  # exercise 1 does not ask for it
    at.selectbox(key="workshop_exercise").set_value(15).run()
    assert not at.exception
    assert at.button(key="workshop_submit_step").disabled  # nothing answered yet
    at.number_input(key="workshop_last_good").set_value(10).run()
    at.button(key="workshop_submit_step").click().run()
    assert any(w.value.startswith("✗ Last good step 10: too early") for w in at.warning)
    assert "The cause really arrived" not in texts(at) and not read_run_info(run).get("solved")
    at.number_input(key="workshop_last_good").set_value(20).run()
    at.button(key="workshop_submit_step").click().run()
    assert any(s.value.startswith("✓ Last good step 20: right (the doctor says 19;") for s in at.success)
    assert "The cause really arrived at step 20 (run.json's onset_step)" in texts(at)
    assert read_progress(find("15"), workshop)["last_good"] is True
    assert ".venv/bin/python -m playground.exercise check 15 --last-good <step>" in at.code[-1].value
