"""Tests for `app/views/learn.py`: every chapter renders in en and zh, a committed prediction reveals the answer and
the run that breaks the metrics, Train queues the question's run (the processes are `fake_procs`), the inspector's
target is the step where the broken run breaks, and a demo run not trained yet comes with its command."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from playground.demo import DEMO_RUNS
from playground.teach import i18n
from playground.teach.learning_path import load

from app_helpers import ENTRY, chart_data, charts_of, texts
from fake_procs import run_dir_of
from fake_runs import finding, write_last_good, write_run

CHAPTERS = {chapter.section: chapter for chapter in load([name for name, _ in DEMO_RUNS])}
TOKEN_TASKS = {"reverse", "calc", "countdown"}
BREAKS_AT = 7  # the step of each fake broken run's finding


def _write_demo_run(folder: Path, name: str) -> Path:
    """A fake demo run by its demo name: a token or gym run of its task, the broken ones with their finding."""
    task, _, scenario = name.partition("-")
    broken = next((c for c in CHAPTERS.values() if c.broken == name), None)
    findings = [finding(broken.finding, "warning", BREAKS_AT, 40)] if broken else [finding("healthy", "info", 1, 40)]
    return write_run(folder / name, family="token" if task in TOKEN_TASKS else "gym", task=task, scenario=scenario,
                     steps=40, findings=findings, overrides=dict(DEMO_RUNS)[name])


@pytest.fixture
def demo(tmp_path, monkeypatch) -> Path:
    """Every demo run the path names, under the only runs folder's `demo/`."""
    monkeypatch.setenv("PLAYGROUND_RUNS", str(tmp_path / "outputs"))
    monkeypatch.setenv("PLAYGROUND_WORKSHOP", str(tmp_path / "outputs" / "workshop"))
    folder = tmp_path / "outputs" / "demo"
    for name in sorted({run for chapter in CHAPTERS.values() for run in chapter.runs}):
        _write_demo_run(folder, name)
    return folder


def _page(lang: str = "en", section: str = "§1") -> AppTest:
    at = AppTest.from_file(ENTRY, default_timeout=60)
    at.session_state["lang"] = lang
    at.run().switch_page("views/learn.py").run()
    return at.radio(key="learn_chapter").set_value(section).run()


def _commit(at: AppTest, section: str, option: int) -> AppTest:
    number = CHAPTERS[section].number
    at.radio(key=f"learn_option_{number}").set_value(option).run()
    return at.button(key=f"learn_commit_{number}").click().run()


def _series(at: AppTest) -> set[str]:
    return {name for chart in charts_of(at) for frame in chart_data(chart) if "series" in frame
            for name in frame["series"].dropna()}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_chapter_renders_before_and_after_a_prediction(demo, lang):
    at = _page(lang)
    for section, chapter in CHAPTERS.items():
        at.radio(key="learn_chapter").set_value(section).run()
        assert not at.exception, (section, [e.message for e in at.exception])
        assert at.header[0].value == f"{section} · {chapter.title[lang]}"
        assert chapter.paragraph[lang] in texts(at)
        captions = [c.value for c in at.caption]
        absent = [m for m in chapter.metrics if i18n.text("learn_metric_absent", lang, metric=m) in captions]
        assert len(charts_of(at)) + len(absent) == len(chapter.metrics)  # a chart, or why there is none
        _commit(at, section, 0)
        assert not at.exception, (section, [e.message for e in at.exception])
        assert chapter.question.answer[lang] in texts(at)


def test_a_committed_prediction_reveals_the_answer_and_the_broken_run(demo):
    chapter = CHAPTERS["§1"]
    at = _page()
    assert "joins the charts once you have committed a prediction" in texts(at)
    assert _series(at) == {"healthy · reverse-healthy"}
    assert chapter.question.answer["en"] not in texts(at)
    assert at.button(key="learn_commit_1").disabled  # nothing chosen yet
    at = _commit(at, "§1", chapter.question.right)
    assert at.success[0].value.startswith("Right: Both jump")
    assert chapter.question.answer["en"] in texts(at)
    assert _series(at) == {"healthy · reverse-healthy", "broken · reverse-lr_too_high"}
    did = texts(at)
    assert "**broken · reverse-lr_too_high** · `actor/pg_clipfrac`: " in did and "median" in did
    assert f"The diagnosis found **lr_too_high** in reverse-lr_too_high from step {BREAKS_AT}." in did
    at.button(key="learn_again_1").click().run()
    assert at.radio(key="learn_option_1").value is None and _series(at) == {"healthy · reverse-healthy"}
    at = _commit(at, "§1", 0)
    assert at.warning[0].value.startswith("Not this time. You predicted: Little changes")


def test_the_chapters_are_reachable_one_after_another(demo):
    at = _page()
    walked = [at.header[0].value.split(" · ")[0]]
    while any(b.key == "learn_next" for b in at.button):
        at.button(key="learn_next").click().run()
        walked.append(at.header[0].value.split(" · ")[0])
    assert walked == list(CHAPTERS)
    at.button(key="learn_prev").click().run()
    assert at.radio(key="learn_chapter").value == "§11"


def test_inspect_opens_the_token_inspector_at_the_step_where_it_breaks(demo):
    at = _commit(_page(), "§1", 1)
    assert f"reverse-lr_too_high, step {BREAKS_AT}, focus: clipped" in texts(at)
    at.button(key="learn_inspect_1").click().run()
    assert not at.exception
    assert at.selectbox(key="inspector_run").value == str(demo / "reverse-lr_too_high")  # the inspector, on the run
    assert at.session_state["inspector_quantity"] == "clipped"  # drawn once the run has records: a fake one has none
    assert "kept no token records" in texts(at)


def test_without_its_finding_the_inspector_opens_on_the_broken_runs_last_step(demo):
    write_run(demo / "reverse-response_truncation", family="token", task="reverse", steps=20,
              findings=[finding("healthy", "info", 1, 20)])
    at = _commit(_page(section="§4"), "§4", 0)
    assert "The diagnosis has not found response_truncation in reverse-response_truncation." in texts(at)
    assert "reverse-response_truncation, step 20, focus: zero_adv" in texts(at)  # the run's last step
    at.button(key="learn_inspect_4").click().run()
    assert not at.exception and at.session_state["inspector_alike"]  # the zero-advantage groups


def test_the_turn_chapter_marks_the_cause_and_the_onset_and_inspects_at_the_onset(demo):
    chapter = CHAPTERS["§11.3"]
    run = write_run(demo / chapter.broken, family="token", task="reverse", scenario="rollout_mismatch", steps=40,
                    findings=[finding("rollout_mismatch", "warning", BREAKS_AT, 40)],
                    overrides=dict(DEMO_RUNS)[chapter.broken], extra_info={"onset_step": 5})
    write_last_good(run, 6, "rollout_mismatch", 5)
    at = _page(section="§11.3")
    assert not any(b.key == "learn_inspect_11-3" for b in at.button)  # the broken run waits for the prediction
    at = _commit(at, "§11.3", chapter.question.right)
    assert not at.exception
    said = texts(at)
    assert ("The cause arrived in reverse-rollout_mismatch-at12 at step **5** (run.json's `onset_step`): the dotted "
            "blue rule on the charts.") in said
    assert ("The diagnosis saw its first problem, rollout_mismatch, begin at step **6** (the dashed rule): the last "
            "good step is **5**, the checkpoint to go back to.") in said
    marks = [r for c in charts_of(at) for f in chart_data(c) if {"x", "text", "kind"} <= set(f)
             for r in f[["x", "text", "kind"]].to_dict("records")]
    assert {"x": 5.0, "text": "the cause arrived: step 5", "kind": "cause"} in marks
    assert {"x": 6.0, "text": "since step 6: rollout_mismatch", "kind": "onset"} in marks
    assert "reverse-rollout_mismatch-at12, step 6, focus: mismatch" in said  # at the onset, not the finding's step 7
    at.button(key="learn_inspect_11-3").click().run()
    assert not at.exception and at.selectbox(key="inspector_run").value == str(run)
    assert at.session_state["inspector_quantity"] == "mismatch"


def test_gym_chapters_and_the_one_without_a_broken_run_offer_no_inspector(demo):
    for section in ("§2", "§3", "§7"):
        at = _commit(_page(section=section), section, 0)
        assert not any(b.key == f"learn_inspect_{CHAPTERS[section].number}" for b in at.button), section
    assert "No demo run breaks these metrics" in texts(at)  # §7
    assert _series(at) == {"healthy · reverse-healthy"}


def test_train_queues_the_questions_run_and_draws_it_beside_the_demo_runs(demo, spawn):
    at = _page()
    assert not any(b.key == "learn_train_1" for b in at.button)  # predict first
    at = _commit(at, "§1", 0)
    command = ".venv/bin/python -m playground.train task=reverse algorithm.adv_estimator=gae " \
              "actor_rollout_ref.actor.optim.lr=0.005"
    assert command in [c.value for c in at.code]
    at.button(key="learn_train_1").click().run()
    (argv,) = spawn.argvs
    run = run_dir_of(argv)
    assert argv[:-1] == [sys.executable, "-m", "playground.train", "task=reverse", "algorithm.adv_estimator=gae",
                         "actor_rollout_ref.actor.optim.lr=0.005"]
    assert run.parent.parent == demo.parent / "learn" and run.name.endswith("-s1-reverse-healthy")
    assert at.session_state["learn_runs"] == {"§1": str(run)}
    assert not at.exception
    assert f"your run · {run.name}" in _series(at)  # the fake process wrote its metrics at once


def test_a_refused_run_says_why_and_starts_nothing(demo, spawn, monkeypatch):
    import knobs

    monkeypatch.setattr(knobs, "check", lambda overrides: knobs.Checked(overrides, "data.max_response_length=4 is "
                                                                                     "too short"))
    at = _commit(_page(section="§4"), "§4", 0)
    at.button(key="learn_train_4").click().run()
    assert spawn.argvs == [] and "Not started: data.max_response_length=4 is too short" in texts(at)


def test_a_demo_run_not_trained_yet_comes_with_its_command(tmp_path, monkeypatch):
    monkeypatch.setenv("PLAYGROUND_RUNS", str(tmp_path / "outputs"))
    at = _page(section="§2")
    assert not at.exception
    folder = tmp_path / "outputs" / "demo"
    assert f"Not trained yet (no metrics in `{folder}`): cartpole-healthy." in texts(at)
    codes = [c.value for c in at.code]
    assert f".venv/bin/python -m playground.train task=cartpole hydra.run.dir={folder / 'cartpole-healthy'}" in codes
    assert f".venv/bin/python -m playground.demo --no-explorer --runs {folder}" in codes
    assert "cartpole-critic_undertrained" not in texts(at)  # the broken run is named once a prediction is made
    at = _commit(at, "§2", 0)
    assert "cartpole-healthy, cartpole-critic_undertrained." in texts(at)
    assert "`critic/vf_explained_var`: none of the runs shown has logged it yet." in texts(at)


def test_a_pending_prediction_survives_a_language_switch(demo):
    at = _page()
    at.radio(key="learn_option_1").set_value(2).run()
    at.session_state["lang"] = "zh"
    at.run()
    assert at.radio(key="learn_option_1").value == 2
    assert at.radio(key="learn_option_1").label == "你的预测"
