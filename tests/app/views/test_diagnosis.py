"""Tests for `app/views/diagnosis.py`: findings on a timeline, explanations, the fix command, mystery runs."""

from __future__ import annotations

import json

import pandas as pd

import data
from app_helpers import chart_data, chart_titles, charts_of, show, texts
from fake_runs import LR_TOO_HIGH, diagnosis, finding, write_report


def _diagnosis(app, *runs):
    return show(app.run(), *runs).switch_page("views/diagnosis.py").run()


def test_findings_timeline_explanation_and_fix_command(app, tree):
    at = _diagnosis(app, tree["unstable"])
    assert not at.exception
    assert len(charts_of(at)) == 1  # the timeline
    assert "lr_too_high: explained in English." in texts(at)
    commands = [c.value for c in at.code]
    assert (".venv/bin/python -m playground.train task=cartpole scenario=lr_too_high seed=0 "
            "actor_rollout_ref.actor.optim.lr=1e-4") in commands
    at.radio(key="lang").set_value("zh").run()
    assert "lr_too_high：中文解释。" in texts(at)


def test_healthy_is_the_runs_verdict_not_a_finding_among_its_notes(app, tree):
    """A healthy run with performance notes: the verdict in a success box; the timeline holds the notes alone."""
    healthy, mfu = finding("healthy", "info", 1, 60), finding("low_mfu", "info", 5, 60)
    write_report(tree["healthy"], [healthy, mfu], diagnoses=[diagnosis(healthy), diagnosis(mfu)])
    at = _diagnosis(app, tree["healthy"])
    assert not at.exception
    (verdict,) = at.success
    assert verdict.value == ":green-badge[healthy] Verdict: healthy. Nothing of severity warning or worse over the " \
                            "whole run."
    assert "healthy: explained in English." in texts(at)
    (timeline,) = charts_of(at)
    labels = set(pd.concat(chart_data(timeline))["label"].dropna())
    assert labels == {"1. low_mfu"}  # numbered from 1: the verdict is no row
    assert ":blue-badge[healthy]" not in texts(at) and ":blue-badge[low_mfu]" in texts(at)


def test_pick_another_run_and_a_crash(app, tree):
    at = _diagnosis(app, tree["unstable"], tree["crashed"])
    at.selectbox(key="diagnosis_run").set_value(str(tree["crashed"])).run()
    assert ":red-badge[training_crash]" in texts(at)
    assert any("actor_rollout_ref.actor.grad_clip=1.0" in c.value for c in at.code)


def test_a_run_its_user_stopped_is_said_as_a_stop_not_in_red(app, tree):
    # issue 49: the explorer's Stop showed a red "interrupted: terminated by signal SIGTERM"
    info_path = tree["healthy"] / "run.json"
    info = json.loads(info_path.read_text())
    stopped = {**info, "status": "interrupted", "last_step": 60, "total_steps": 200,
               "error": "stopped by you (Ctrl-C, or Stop in the explorer)"}
    info_path.write_text(json.dumps(stopped))
    data.list_runs.clear()
    at = _diagnosis(app, tree["healthy"])
    assert not at.error and [i.value for i in at.info if i.value.startswith("Stopped")] == [
        "Stopped by you at step 60 of 200: the metrics so far are kept, and the diagnosis reads them."]
    info_path.write_text(json.dumps({**stopped, "error": "terminated by signal SIGTERM"}))  # a kill, no failure
    data.list_runs.clear()
    at = _diagnosis(app, tree["healthy"])
    assert not at.error and any(i.value.startswith("Stopped at step 60 of 200 (terminated by signal SIGTERM)")
                                for i in at.info)


def test_mystery_run_hides_findings_until_the_exercise_is_solved(app, tree):
    at = _diagnosis(app, tree["mystery"])
    assert "entropy_collapse" not in texts(at) and "exercise check" in texts(at)
    assert not list(at.button)  # no way around the checker
    info_path = tree["mystery"] / "run.json"
    info = json.loads(info_path.read_text())
    info_path.write_text(json.dumps({**info, "solved": True}))  # what `playground.exercise check` writes
    data.list_runs.clear()  # the run list is cached for a couple of seconds
    at = _diagnosis(app, tree["mystery"])
    assert ":orange-badge[entropy_collapse]" in texts(at)


def test_running_run_is_diagnosed_by_the_engine_so_far(app, tree):
    at = _diagnosis(app, tree["running"])
    assert not at.exception
    assert "Still running" in texts(at)
    assert chart_titles(at) or "No findings" in texts(at)


def test_a_diagnosis_that_fails_keeps_the_page_working(app, tree, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a rule broke")

    monkeypatch.setattr(data.engine, "diagnose", broken)
    data._engine.clear()  # the engine's results are cached by log
    at = _diagnosis(app, tree["running"])  # no findings.json: the engine runs, and fails
    assert not at.exception
    assert "The diagnosis failed on this log (RuntimeError: a rule broke)" in texts(at)
    at.selectbox(key="diagnosis_run")  # the page is still there


def test_a_root_cause_with_its_consequences_under_it(app, tree):
    from fake_runs import LR_TOO_HIGH, diagnosis, finding, write_report

    clip = {**finding("grad_clip_saturation", "warning", 6, 20), "fix": "actor_rollout_ref.actor.optim.lr=1e-4"}
    write_report(tree["unstable"], [LR_TOO_HIGH, clip], [diagnosis(LR_TOO_HIGH, clip)],
                 ruled_out=[{"name": "critic", "title": {"en": "critic (vf_explained_var)", "zh": "Critic"}}])
    data.list_runs.clear()
    at = _diagnosis(app, tree["unstable"])
    assert not at.exception
    shown = texts(at)
    assert "**1.** :orange-badge[lr_too_high]" in shown and "*root cause*" in shown
    assert "↳ **1.1.** :orange-badge[grad_clip_saturation]" in shown and "*a consequence of lr_too_high*" in shown
    assert "Checked and ruled out (guide §11.2): critic (vf_explained_var)" in shown
    assert shown.index("lr_too_high]") < shown.index("grad_clip_saturation]")


def test_the_last_good_step_its_checkpoint_and_each_findings_onset(app, tree):
    """issue 50: since which step, and which checkpoint to go back to."""
    root = {**LR_TOO_HIGH, "since_step": 3}  # a window rule's: held first on the window of steps 3-5
    write_report(tree["unstable"], [root], diagnoses=[diagnosis(root)])
    path = tree["unstable"] / "findings.json"
    good = {"onset_step": 3, "finding": "lr_too_high", "step": 2, "checkpoint": "global_step_2",
            "checkpoint_path": None}
    path.write_text(json.dumps({**json.loads(path.read_text()), "last_good": good}))
    at = _diagnosis(app, tree["unstable"])
    assert not at.exception
    assert ("Last good step: **2**, before the first problem (lr_too_high, since step 3). Go back to checkpoint "
            "`global_step_2`.") in texts(at)
    assert ":orange-badge[lr_too_high] · steps 5–60 · since step 3" in texts(at)
    path.write_text(json.dumps({**json.loads(path.read_text()), "last_good": {**good, "step": None}}))
    at = _diagnosis(app, tree["unstable"])
    assert "No good step: the first problem (lr_too_high) holds from step 3, the run's first." in texts(at)
