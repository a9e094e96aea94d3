"""Tests for `app/views/inspector.py` (the Step inspector) over a real token run's records, and the Diagnosis page's
way into it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app_helpers import show, texts
from fake_runs import finding, write_report


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """A reverse lr_too_high run of 2 steps whose token records hold every response (trained once)."""
    from playground.config import compose
    from playground.train import fit

    run_dir = tmp_path_factory.mktemp("real") / "run"
    cfg = compose(["task=reverse", "scenario=lr_too_high", "trainer.total_training_steps=2", "trainer.logger=[]",
                   "trainer.progress_bar=false", "trainer.token_records.responses_per_step=-1"])
    fit([cfg], [run_dir], [["task=reverse", "scenario=lr_too_high"]])
    return run_dir


@pytest.fixture
def token_run(recorded, tree) -> Path:
    """The recorded run inside the test's tree, with an lr_too_high finding from its step 2."""
    run = Path(tree["healthy"]).parents[1] / "2026-12-06" / "10-00-00"
    shutil.copytree(recorded, run)
    write_report(run, [finding("lr_too_high", "warning", 2, 2)], family="token")
    return run


def _html(at) -> str:
    return "\n".join(e.proto.body for e in at.get("html"))


def _inspector(app):
    return app.run().switch_page("views/inspector.py").run()


def test_the_inspector_colours_a_steps_tokens_and_draws_its_distributions(app, token_run):
    at = _inspector(app)
    assert not at.exception
    at.selectbox(key="inspector_run").set_value(str(token_run)).run()
    assert not at.exception
    assert at.select_slider(key="inspector_step").value == 2  # the last recorded step
    html = _html(at)
    assert html.count("<div") == 8 and "font-family:monospace" in html  # the first 8 responses, token by token
    assert "&lt;eos&gt;" in html  # specials by name
    assert "Response" in texts(at) and "its group's rewards" in texts(at)
    assert len(at.get("vega_lite_chart")) == 3  # ratio (with the clip band), entropy, advantage
    at.selectbox(key="inspector_quantity").set_value("clipped").run()
    assert not at.exception and "most clipped first" in texts(at)
    at.radio(key="lang").set_value("zh").run()
    assert not at.exception and "回复" in texts(at)


def test_a_finding_on_the_diagnosis_page_opens_the_inspector_on_its_tokens(app, token_run):
    at = show(app.run(), token_run).switch_page("views/diagnosis.py").run()
    assert not at.exception
    (button,) = [b for b in at.button if b.label == "Inspect the tokens at step 2"]
    at = button.click().run()
    assert not at.exception
    assert at.selectbox(key="inspector_run").value == str(token_run)
    assert at.select_slider(key="inspector_step").value == 2
    assert at.selectbox(key="inspector_quantity").value == "clipped"  # lr_too_high's tokens: the clipped ones
    assert "clipped (" in texts(at)  # the step's clipped share, from its records
    assert "Opened at the onset of **lr_too_high**: step **2**" in texts(at)


def test_a_finding_opens_the_inspector_at_its_onset_not_its_first_step(app, token_run):
    """A window rule's finding reported from step 2 whose condition first held on the window from step 1."""
    write_report(token_run, [{**finding("lr_too_high", "warning", 2, 2), "since_step": 1}], family="token")
    at = show(app.run(), token_run).switch_page("views/diagnosis.py").run()
    (button,) = [b for b in at.button if b.label == "Inspect the tokens at step 1"]
    at = button.click().run()
    assert not at.exception
    assert at.select_slider(key="inspector_step").value == 1
    assert "Opened at the onset of **lr_too_high**: step **1**" in texts(at)
    at.select_slider(key="inspector_step").set_value(2).run()
    assert not at.exception and "Opened at the onset" not in texts(at)  # the header names the onset's step alone


def test_a_token_run_without_records_says_how_to_get_them(app, tree):
    at = _inspector(app)
    at.selectbox(key="inspector_run").set_value(str(tree["token"])).run()
    assert not at.exception
    assert "kept no token records" in texts(at)
    assert any("trainer.token_records.enable=true" in c.value for c in at.code)
