"""Tests for `app/views/sweeps.py`: the stability map and parallel coordinates of a multirun dir."""

from __future__ import annotations

import json
import sys

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

import data
from app_helpers import ENTRY, chart_data, charts_of, texts


def test_sweep_heatmap_and_parallel_coordinates(app, tree):
    at = app.run().switch_page("views/sweeps.py").run()
    assert not at.exception
    assert "6 jobs; swept: actor_rollout_ref.actor.optim.lr, actor_rollout_ref.actor.clip_ratio" in texts(at)
    heat, parallel = charts_of(at)
    cells = chart_data(heat)[0]
    assert len(cells) == 6 and set(cells["x"]) == {"0.0001", "0.0003", "0.001"}
    assert (cells.loc[cells["x"] == "0.001", "diagnosis"] == "lr_too_high").all()
    scores = cells.set_index(["x", "y"])["score"]
    assert scores[("0.001", "0.1")] < scores[("0.0001", "0.1")]  # the unstable corner scores low
    assert json.loads(heat.proto.spec)["layer"][0]["encoding"]["color"]["field"] == "score"
    lines = pd.concat(chart_data(parallel))
    assert {"actor_rollout_ref.actor.optim.lr", "final score"} <= set(lines["dim"].dropna())


def test_colour_by_diagnosis_swap_axes_and_show_the_sweep(app, tree):
    at = app.run().switch_page("views/sweeps.py").run()
    at.radio(key="color_by").set_value("diagnosis").run()
    assert json.loads(charts_of(at)[0].proto.spec)["layer"][0]["encoding"]["color"]["field"] == "diagnosis"
    at.selectbox(key="heat_x").set_value("actor_rollout_ref.actor.clip_ratio").run()
    assert set(chart_data(charts_of(at)[0])[0]["x"]) == {"0.1", "0.2"}
    at.button(key="show_sweep").click().run()
    assert sorted(at.multiselect(key="runs").value) == sorted(str(tree["sweep"] / str(j)) for j in range(6))


@pytest.fixture
def empty(tmp_path, monkeypatch):
    monkeypatch.setenv("PLAYGROUND_RUNS", str(tmp_path / "outputs"))
    return tmp_path / "outputs"


def _new_sweep(empty):
    at = AppTest.from_file(ENTRY, default_timeout=60).run().switch_page("views/sweeps.py").run()
    at.number_input(key="sweep_steps").set_value(10)
    at.text_input(key="sweep_values_1").input("0.005, 0.05")
    at.selectbox(key="sweep_knob_2").set_value("entropy_coeff").run()
    at.text_input(key="sweep_values_2").input("0, 0.05")
    return at.text_input(key="sweep_seeds").input("1, 2").run()


def test_a_new_sweep_is_a_batched_multirun_mapped_as_it_runs(empty, spawn):
    at = _new_sweep(empty)
    assert "No multirun sweeps" in texts(at) and "8 runs" in texts(at)
    at.button(key="sweep_start").click().run()
    (argv,) = spawn.argvs
    sweep_dir = argv[-1].split("=", 1)[1]
    assert sweep_dir.startswith(str(empty / "multirun")) and sweep_dir.endswith("cartpole-actor_lr-entropy_coeff")
    assert argv[:-1] == [sys.executable, "-m", "playground.train", "-m", "hydra/launcher=batched",
                         "hydra.launcher.num_threads=1", "task=cartpole", "scenario=healthy",
                         "trainer.total_training_steps=10", "actor_rollout_ref.actor.optim.lr=0.005,0.05",
                         "actor_rollout_ref.actor.entropy_coeff=0.0,0.05", "trainer.seed=1,2",
                         "trainer.progress_bar=false"]
    data.list_runs.clear()  # the run list is re-read every 2 s; the fake sweep was written at once
    at.run()
    assert at.selectbox(key="sweep").value == sweep_dir  # the new sweep is the one shown
    assert ("8 jobs; swept: actor_rollout_ref.actor.optim.lr, actor_rollout_ref.actor.entropy_coeff, trainer.seed"
            in texts(at))
    cells = chart_data(charts_of(at)[0])[0]
    assert len(cells) == 4 and set(cells["runs"]) == {2}  # 2 x 2 cells, two seeds each
    assert (cells.loc[cells["x"] == "0.05", "diagnosis"] == "lr_too_high").all()


def test_a_sweep_that_would_not_run_starts_nothing(empty, spawn):
    at = _new_sweep(empty)
    at.selectbox(key="sweep_knob_2").set_value("mini_batch").run()
    at.text_input(key="sweep_values_2").input("128, 100").run()
    line = ("actor_rollout_ref.actor.ppo_mini_batch_size=100 is out of range: must divide the batch of 512 "
            "transitions into whole mini-batches")
    assert line in [e.value for e in at.error]  # the validator's, for the combination that fails
    at.button(key="sweep_start").click().run()
    at.text_input(key="sweep_values_2").input("128, many").run()
    assert "actor_rollout_ref.actor.ppo_mini_batch_size: 'many' is not an integer" in [e.value for e in at.error]
    at.text_input(key="sweep_values_2").input(", ".join(str(2 ** k) for k in range(9))).run()
    assert "36 runs is too many for one sweep here (at most 32)." in [e.value for e in at.error]
    assert spawn.started == [] and not (empty / "multirun").exists()
