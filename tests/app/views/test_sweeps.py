"""Tests for `app/views/sweeps.py`: the stability map and parallel coordinates of a multirun dir."""

from __future__ import annotations

import json

import pandas as pd

from app_helpers import chart_data, charts_of, texts


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
