"""Tests for playground/tasks/base_build.py: a base that builds says so on the terminal and in run.json."""

from __future__ import annotations

import io
import json

import pytest

from playground.config import compose
from playground.tasks import base_build
from playground.tasks.sft import SFTProgress


def test_a_build_is_said_on_the_terminal_and_in_each_run_json(tmp_path, monkeypatch):
    monkeypatch.setattr(base_build, "SAY_EVERY_S", 0.0)
    out = io.StringIO()
    dirs = [tmp_path / "a", tmp_path / "b"]
    report = base_build.BaseReport("countdown", dirs, [{"seed": 1}, {"seed": 2}], stream=out)
    report(SFTProgress(1, 4000, 2.2, None))
    report(SFTProgress(500, 4000, 100.0, 0.05))
    report(SFTProgress(256, 3000, 50.0, 0.12, target=0.3))  # a base that stops at its target
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("building the countdown SFT base")
    assert lines[1] == "  SFT base: step 1/4000 (0%), estimating the time left"  # one step's pace says nothing yet
    assert lines[2] == "  SFT base: step 500/4000 (12%), val accuracy 0.05, ~12 min left"  # 0.2 s a step, 3500 to go
    assert lines[3] == "  SFT base: step 256 of at most 3000, val accuracy 0.12 (stops at 0.30), at most ~9 min left"
    for run_dir, seed in zip(dirs, (1, 2)):
        info = json.loads((run_dir / "run.json").read_text())
        assert info["status"] == "running" and info["phase"] == "sft_base" and info["seed"] == seed
        assert info["base"]["step"] == 1 and info["base"]["total"] == 4000  # written at the first step


def test_a_resumed_build_says_where_it_goes_on_from():
    out = io.StringIO()
    base_build.BaseReport("countdown", [], [], stream=out)(SFTProgress(306, 4000, 61.0, None))
    assert out.getvalue().splitlines()[0] == ("building the countdown SFT base: resuming a stopped build after its "
                                              "step 305")


def _prepare(cfg, run_dir):
    """`prepare_base` as the entry calls it (`train.build_trainer`): the config resolved, the run's facts listed."""
    import torch

    from playground.run_spec import resolve_run

    spec = resolve_run([cfg], torch.device("cpu"))
    return base_build.prepare_base(spec.task.base, [run_dir], [spec.agents[0].log.info], [{}])


def test_an_interrupted_build_says_it_resumes(tmp_path, monkeypatch):
    def stopped(base, progress):
        progress(SFTProgress(120, 4000, 30.0, None))
        raise KeyboardInterrupt

    monkeypatch.setattr(base_build, "base_model_for", stopped)
    with pytest.raises(KeyboardInterrupt):
        _prepare(compose(["task=countdown", "trainer.seed=7"]), tmp_path)
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["status"] == "interrupted" and "step 120/4000" in info["error"] and "resumes" in info["error"]
    assert (info["task"], info["scenario"], info["seed"]) == ("countdown", "healthy", 7)  # the Runs page's columns
    assert info["end_time"] is not None


def test_a_base_that_needs_no_build_writes_nothing(tmp_path):
    prepared = _prepare(compose(["task=reverse"]), tmp_path / "run")
    assert prepared.base.cached and prepared.base.path.parent.name == "bases"  # the shipped file, loaded
    assert not (tmp_path / "run").exists()


def test_a_token_run_loads_its_base_once(tmp_path, monkeypatch):
    """`train.fit` makes the base ready (to say a build) and the task starts from that, not from a second load."""
    from playground import train

    calls = []
    real = base_build.build_base_model
    monkeypatch.setattr(base_build, "build_base_model", lambda *a, **k: calls.append(1) or real(*a, **k))
    cfg = compose(["task=reverse", "trainer.total_training_steps=1", "trainer.test_freq=-1"])
    train.fit([cfg], [tmp_path / "run"], [[]])
    assert len(calls) == 1
