"""Tests for `app/views/sweeps.py`: the stability map and parallel coordinates of a multirun dir."""

from __future__ import annotations

import json
import sys

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

import data
import sweep_map
from app_helpers import ENTRY, chart_data, charts_of, texts
from fake_runs import diagnosis, finding, write_sweep

LR = "actor_rollout_ref.actor.optim.lr"
CLIP = "actor_rollout_ref.actor.clip_ratio"


def test_sweep_heatmap_and_parallel_coordinates(app, tree):
    at = app.run().switch_page("views/sweeps.py").run()
    assert not at.exception
    assert "6 jobs; swept: actor_rollout_ref.actor.optim.lr, actor_rollout_ref.actor.clip_ratio" in texts(at)
    heat, parallel = charts_of(at)
    cells = chart_data(heat)[0]
    assert len(cells) == 6 and set(cells["x"]) == {"0.0001", "0.0003", "0.001"}
    assert (cells.loc[cells["x"] == "0.001", "root"] == "lr_too_high").all()
    scores = cells.set_index(["x", "y"])["score"]
    assert scores[("0.001", "0.1")] < scores[("0.0001", "0.1")]  # the unstable corner scores low
    assert json.loads(heat.proto.spec)["layer"][0]["encoding"]["color"]["field"] == "score"
    lines = pd.concat(chart_data(parallel))
    assert {"actor_rollout_ref.actor.optim.lr", "final score"} <= set(lines["dim"].dropna())


def test_colour_by_root_swap_axes_and_show_the_sweep(app, tree):
    at = app.run().switch_page("views/sweeps.py").run()
    at.radio(key="color_by").set_value("root").run()
    assert json.loads(charts_of(at)[0].proto.spec)["layer"][0]["encoding"]["color"]["field"] == "root"
    at.selectbox(key="heat_x").set_value("actor_rollout_ref.actor.clip_ratio").run()
    assert set(chart_data(charts_of(at)[0])[0]["x"]) == {"0.1", "0.2"}
    at.button(key="show_sweep").click().run()
    assert sorted(at.multiselect(key="runs").value) == sorted(str(tree["sweep"] / str(j)) for j in range(6))


def test_a_one_seed_sweep_has_no_spread(app, tree):
    at = app.run().switch_page("views/sweeps.py").run()
    cells = chart_data(charts_of(at)[0])[0].set_index(["x", "y"])
    assert cells.loc[("0.0001", "0.1"), "label"].endswith(" ± — · 1/1 healthy · healthy")
    assert cells.loc[("0.001", "0.2"), "label"].endswith(" ± — · 0/1 healthy · lr_too_high")
    assert "Each cell aggregates its seeds (1 per cell)" in texts(at)


def _outcome(lr, clip, seed):
    """lr 1e-2 at clip 0.2: seeds 2 and 3 lr_too_high (its consequence, gradient_explosion, is critical: the worst
    finding, not the root), seed 1 healthy; lr 1e-2 at clip 0.1: one root each; the rest healthy."""
    high = diagnosis(finding("lr_too_high", "warning", 5, 40), finding("gradient_explosion", "critical", 9, 40))
    if lr == 1e-2 and clip == 0.2 and seed > 1:
        return [high, diagnosis(finding("low_mfu", "info", 1, 40))]
    if lr == 1e-2 and clip == 0.1:
        return [[high], [diagnosis(finding("critic_undertrained", "warning", 3, 40))], []][seed - 1]
    return []


@pytest.fixture
def seeded(tmp_path, monkeypatch):
    """One sweep of lr x clip x trainer.seed (2 x 2 x 3 jobs) with diagnoses, and nothing else."""
    sweep = write_sweep(tmp_path / "multirun", lrs=(1e-4, 1e-2), clips=(0.1, 0.2), seeds=(1, 2, 3),
                        seed_key="trainer.seed", outcome=_outcome)
    monkeypatch.setenv("PLAYGROUND_RUNS", str(tmp_path / "multirun"))
    return sweep


def _scores(sweep, jobs):
    from playground.rundir.score import run_score

    return [run_score(sweep / str(j)) for j in jobs]


def test_a_cell_shows_its_seeds_mean_spread_healthy_share_and_most_common_root(seeded):
    at = AppTest.from_file(ENTRY, default_timeout=60).run().switch_page("views/sweeps.py").run()
    assert not at.exception
    assert f"12 jobs; swept: {LR}, {CLIP}, trainer.seed" in texts(at)
    assert at.selectbox(key="heat_x").options == [LR, CLIP]  # the seed is no axis
    assert "Each cell aggregates its seeds (3 per cell): the mean ± standard deviation (n − 1)" in texts(at)
    heat = charts_of(at)[0]
    cells = chart_data(heat)[0].set_index(["x", "y"])
    assert len(cells) == 4 and set(cells["runs"]) == {3}
    scores = _scores(seeded, [9, 10, 11])  # lr 1e-2, clip 0.2: jobs 9-11, seeds 1-3
    cell = cells.loc[("0.01", "0.2")]
    assert cell["score"] == pytest.approx(np.mean(scores)) and cell["spread"] == pytest.approx(np.std(scores, ddof=1))
    assert (cell["lo"], cell["hi"]) == (pytest.approx(min(scores)), pytest.approx(max(scores)))
    assert cell["root"] == "lr_too_high"  # the root, not the worst finding (gradient_explosion)
    spread = sweep_map.mean_spread(np.mean(scores), np.std(scores, ddof=1))
    assert cell["label"] == f"{spread} · 1/3 healthy · lr_too_high"
    assert cell["text"] == cell["label"].replace(" · ", "\n")
    assert cell["roots"] == "lr_too_high ×2, healthy ×1"
    tied = cells.loc[("0.01", "0.1")]  # one seed each of lr_too_high, critic_undertrained, healthy: §11.2 order
    assert (tied["root"], tied["healthy"], tied["share"]) == ("lr_too_high", 1, pytest.approx(1 / 3))
    assert cells.loc[("0.0001", "0.1"), "label"].endswith(" · 3/3 healthy · healthy")
    spec = json.loads(heat.proto.spec)
    assert spec["layer"][1]["encoding"]["text"]["field"] == "text" and spec["layer"][1]["mark"]["lineBreak"] == "\n"
    at.radio(key="color_by").set_value("root").run()
    assert json.loads(charts_of(at)[0].proto.spec)["layer"][0]["encoding"]["color"]["field"] == "root"
    jobs = at.dataframe[-1].value  # every job, its seed and root
    assert list(jobs["root"][9:12]) == ["healthy", "lr_too_high", "lr_too_high"]
    assert list(jobs["trainer.seed"][9:12]) == ["1", "2", "3"]


def test_the_seed_view_splits_each_cell_and_shows_one_cells_runs(seeded):
    at = AppTest.from_file(ENTRY, default_timeout=60).run().switch_page("views/sweeps.py").run()
    at.radio(key="sweep_cells").set_value("seeds").run()
    assert not at.exception
    heat, parallel = charts_of(at)  # the parallel coordinates stay
    jobs = chart_data(heat)[0]
    assert len(jobs) == 12 and set(jobs["seed"]) == {"1", "2", "3"}
    assert json.loads(heat.proto.spec)["layer"][0]["encoding"]["yOffset"]["field"] == "seed"
    one = jobs[(jobs["x"] == "0.01") & (jobs["y"] == "0.2")].set_index("seed")
    assert list(one["root"]) == ["healthy", "lr_too_high", "lr_too_high"]
    assert one.loc["2", "text"].startswith("2: ") and one.loc["2", "text"].endswith(" · lr_too_high")
    assert "Each cell split into its seeds (trainer.seed)" in texts(at)
    picker = at.selectbox(key="sweep_cell")
    assert picker.options[:2] == [f"{LR}=0.0001 · {CLIP}=0.2", f"{LR}=0.01 · {CLIP}=0.2"]  # top row first
    picker.set_value("0.01\t0.2").run()
    table = at.dataframe[0].value  # the cell's seeds (the sweep's jobs follow)
    assert list(table["trainer.seed"]) == ["1", "2", "3"] and list(table["root"]) == ["healthy", *["lr_too_high"] * 2]
    assert at.button(key="show_cell").label == "Show its 3 runs"
    at.button(key="show_cell").click().run()
    assert at.multiselect(key="runs").value == [str(seeded / str(j)) for j in (9, 10, 11)]
    assert {"trainer.seed", LR} <= set(pd.concat(chart_data(parallel))["dim"].dropna())
    at.radio(key="lang").set_value("zh").run()
    assert not at.exception and "每个单元格按种子（trainer.seed）拆分" in texts(at)


def test_a_one_knob_sweep_is_one_row_of_aggregated_cells(tmp_path, monkeypatch):
    sweep = write_sweep(tmp_path / "multirun", lrs=(1e-4, 1e-3, 1e-2), clips=(), seeds=(1, 2, 3),
                        seed_key="trainer.seed",
                        outcome=lambda lr, clip, seed: [diagnosis(finding("lr_too_high", "warning", 5, 40))]
                        if lr == 1e-2 else [])
    monkeypatch.setenv("PLAYGROUND_RUNS", str(tmp_path / "multirun"))
    at = AppTest.from_file(ENTRY, default_timeout=60).run().switch_page("views/sweeps.py").run()
    assert not at.exception
    assert f"9 jobs; swept: {LR}, trainer.seed" in texts(at)
    assert at.selectbox(key="heat_x").options == [LR] and at.selectbox(key="heat_y").disabled
    heat = charts_of(at)[0]
    cells = chart_data(heat)[0].set_index("x")
    assert len(cells) == 3 and set(cells["y"]) == {"—"} and set(cells["runs"]) == {3}  # one row, seeds aggregated
    assert cells.loc["0.01", "label"].endswith(" · 0/3 healthy · lr_too_high")
    scores = _scores(sweep, [0, 1, 2])
    spread = sweep_map.mean_spread(np.mean(scores), np.std(scores, ddof=1))
    assert cells.loc["0.0001", "label"] == f"{spread} · 3/3 healthy · healthy"
    spec = json.loads(heat.proto.spec)
    assert spec["layer"][0]["encoding"]["y"]["axis"] is None and spec["height"] == 80
    at.radio(key="sweep_cells").set_value("seeds").run()
    jobs = chart_data(charts_of(at)[0])[0]
    assert len(jobs) == 9 and set(jobs["y"]) == {"—"}
    assert at.selectbox(key="sweep_cell").options == [f"{LR}=0.0001", f"{LR}=0.001", f"{LR}=0.01"]


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
                         "actor_rollout_ref.actor.entropy_coeff=0.0,0.05", "trainer.seed=1,2"]
    data.list_runs.clear()  # the run list is re-read every 2 s; the fake sweep was written at once
    at.run()
    assert at.selectbox(key="sweep").value == sweep_dir  # the new sweep is the one shown
    assert ("8 jobs; swept: actor_rollout_ref.actor.optim.lr, actor_rollout_ref.actor.entropy_coeff, trainer.seed"
            in texts(at))
    cells = chart_data(charts_of(at)[0])[0]
    assert len(cells) == 4 and set(cells["runs"]) == {2}  # 2 x 2 cells, two seeds each
    assert (cells.loc[cells["x"] == "0.05", "root"] == "lr_too_high").all()


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
