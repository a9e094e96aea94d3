"""Tests for `app/sweep_map.py`: a sweep's cells, roots and parallel axes."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import sweep_map


def test_most_common_root_ties_by_count_then_guide_order_then_name():
    assert sweep_map.most_common_root(["healthy", "lr_too_high", "lr_too_high"]) == "lr_too_high"
    assert sweep_map.most_common_root(["healthy", "healthy", "lr_too_high"]) == "healthy"  # the majority of seeds
    assert sweep_map.most_common_root(["healthy", "lr_too_high"]) == "lr_too_high"  # healthy loses a tie
    # §11.2: the learning-rate check comes before the critic check, which comes before ids no check names
    assert sweep_map.most_common_root(["entropy_collapse", "critic_undertrained", "lr_too_low"]) == "lr_too_low"
    assert sweep_map.most_common_root(["entropy_collapse", "critic_undertrained"]) == "critic_undertrained"
    assert sweep_map.most_common_root(["overly_deterministic", "entropy_collapse"]) == "entropy_collapse"  # by name
    assert sweep_map.most_common_root(["running", "lr_too_high", "running"]) == "lr_too_high"  # pending jobs wait
    assert sweep_map.most_common_root(["running", "running"]) == "running"
    assert sweep_map.root_counts(["healthy", "lr_too_high", "healthy"]) == "healthy ×2, lr_too_high ×1"


def test_sweep_cells_aggregate_seeds_mean_spread_share_root():
    sweep = pd.DataFrame({
        "run": list("abcdefg"), "lr": ["1e-4"] * 3 + ["1e-2"] * 3 + ["1e-3"], "clip": ["0.2"] * 7,
        "seed": ["1", "2", "3", "1", "2", "3", "1"], "score": [400.0, 460.0, 490.0, 20.0, 300.0, math.nan, 250.0],
        "root": ["healthy", "healthy", "healthy", "lr_too_high", "healthy", "running", "healthy"],
        "healthy": [True, True, True, False, True, None, True]})
    cells = sweep_map.sweep_cells(sweep, "lr", "clip").set_index("x")
    stable = cells.loc["1e-4"]
    assert stable["score"] == pytest.approx(450.0) and stable["spread"] == pytest.approx(np.std([400, 460, 490],
                                                                                                  ddof=1))
    assert (stable["lo"], stable["hi"], stable["runs"], stable["judged"], stable["share"]) == (400, 490, 3, 3, 1.0)
    assert stable["label"] == "450 ± 46 · 3/3 healthy · healthy" and stable["text"].split("\n")[0] == "450 ± 46"
    edge = cells.loc["1e-2"]  # one seed still training: not judged, its score unknown
    assert edge["score"] == pytest.approx(160.0) and (edge["judged"], edge["healthy"]) == (2, 1)
    assert edge["root"] == "lr_too_high" and edge["roots"] == "lr_too_high ×1, running ×1, healthy ×1"
    assert edge["label"] == "160 ± 198 · 1/2 healthy · lr_too_high"
    one = cells.loc["1e-3"]  # one seed: no spread
    assert math.isnan(one["spread"]) and one["label"] == "250 ± — · 1/1 healthy · healthy"
    strip = sweep_map.sweep_cells(sweep, "lr", None, healthy_text="{k}/{n} 健康")  # a one-knob sweep: one row
    assert set(strip["y"]) == {"—"} and len(strip) == 3 and "3/3 健康" in set(strip["label"].str.split(" · ").str[1])
    assert sweep_map.mean_spread(0.9123, 0.05) == "0.912 ± 0.050" and sweep_map.mean_spread(math.nan, 1.0) == "—"
    seeds = sweep_map.seed_cells(sweep, "lr", "clip", "seed")
    assert list(seeds.columns) == ["x", "y", "seed", "run", "score", "root", "text"]
    assert seeds.loc[3, "text"] == "1: 20.0 · lr_too_high" and seeds.loc[5, "text"] == "3: — · running"


def test_parallel_axes_and_value_order():
    sweep = pd.DataFrame({"run": list("abcd"), "lr": ["1e-4", "1e-4", "1e-2", "1e-2"], "clip": ["0.1", "0.2"] * 2,
                          "score": [1.0, 3.0, 5.0, 7.0], "root": ["healthy", "", "lr_too_high", "lr_too_high"]})
    assert sweep_map.sort_values(["1e-2", "3e-4", "1e-4"]) == ["1e-4", "3e-4", "1e-2"]
    long = sweep_map.parallel_long(sweep, ["lr", "clip"])
    lr = long[long["dim"] == "lr"].set_index("run")["pos"]
    assert (lr["a"], lr["c"]) == (0.0, 1.0)
    assert set(long.columns) == {"run", "dim", "pos", "value", "score", "root"}
    assert long.set_index(["run", "dim"]).loc[("b", "lr"), "root"] == "healthy"
