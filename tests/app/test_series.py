"""Tests for `app/series.py`: TensorBoard smoothing, wall time, downsampling, seed groups, bands, marks."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from playground.metrics import STEP

import series


def _tensorboard_ema(values, weight):
    """TensorBoard's loop, transcribed: non-finite points pass through and do not advance the average."""
    last, n, out = 0.0, 0, []
    for v in values:
        if not math.isfinite(v):
            out.append(v)
            continue
        last = last * weight + (1 - weight) * v
        n += 1
        out.append(last / (1 - weight ** n))
    return out


def test_smooth_ema_hand_computed():
    # w=0.5: 1 -> 0.5/0.5 = 1; 2 -> (0.25+1)/0.75 = 5/3; NaN kept; 4 -> (0.625+2)/0.875 = 3
    out = series.smooth_ema([1.0, 2.0, math.nan, 4.0], 0.5)
    assert out[0] == pytest.approx(1.0)
    assert out[1] == pytest.approx(5 / 3)
    assert math.isnan(out[2])
    assert out[3] == pytest.approx(3.0)


def test_smooth_ema_matches_tensorboard_loop():
    values = list(np.random.default_rng(0).normal(size=200)) + [math.inf] + [1.0, 2.0]
    np.testing.assert_allclose(series.smooth_ema(values, 0.9), _tensorboard_ema(values, 0.9))


def test_smooth_ema_zero_weight_and_constant():
    assert list(series.smooth_ema([3.0, 1.0], 0.0)) == [3.0, 1.0]
    np.testing.assert_allclose(series.smooth_ema([2.0] * 5, 0.99), [2.0] * 5)  # the debias keeps a constant
    assert series.smooth_ema([], 0.6).size == 0


def test_ema_window():
    assert series.ema_window(0.0) == 20
    assert series.ema_window(0.6) == 20  # 0.6**14 < 1e-3: the floor of 20 wins
    assert series.ema_window(0.99) == math.ceil(math.log(1e-3) / math.log(0.99))  # 688


def test_wall_time_prefers_timestamps_then_step_time():
    df = pd.DataFrame({STEP: [1.0, 2.0, 3.0], "perf/time_per_step": [2.0, math.nan, 4.0]})
    assert list(series.wall_time(df)) == [2.0, 5.0, 9.0]  # NaN filled with the median (3.0)
    df["timestamp"] = [100.0, 110.0, 125.0]
    assert list(series.wall_time(df)) == [0.0, 10.0, 25.0]
    assert series.wall_time(pd.DataFrame({STEP: [1.0]})) is None


def test_downsample_keeps_extremes_and_non_finite():
    values = np.sin(np.linspace(0, 20, 10_000))
    values[5000], values[7000] = 50.0, math.nan
    kept = series.downsample_index(values, 1000)
    assert len(kept) <= 1003
    assert {0, 5000, 7000, 9999} <= set(kept)
    assert list(series.downsample_index(np.arange(5.0), 1000)) == [0, 1, 2, 3, 4]


def test_metric_long_smooths_before_downsampling():
    df = pd.DataFrame({STEP: np.arange(1.0, 3001.0), "m": np.arange(3000.0), "perf/time_per_step": 0.5})
    long = series.metric_long({"a": df, "b": df.drop(columns="m")}, "m", x_mode="wall", weight=0.5, max_points=100)
    assert set(long["run"]) == {"a"}  # a run without the metric draws nothing
    assert len(long) <= 103
    last = long.iloc[-1]
    assert last["x"] == pytest.approx(1500.0)  # 3000 steps x 0.5 s
    assert last["smoothed"] == pytest.approx(series.smooth_ema(df["m"].to_numpy(), 0.5)[-1])


def test_group_stats_mean_min_max_of_groups_of_two_or_more():
    long = pd.DataFrame({"run": ["a", "a", "b", "b", "c"], "step": [1, 2, 1, 2, 1], "x": [1, 2, 1, 2, 1],
                         "value": [1.0, 2.0, 3.0, 4.0, 9.0], "smoothed": [1.0, 2.0, 3.0, 4.0, 9.0]})
    stats = series.group_stats(long, {"a": "g", "b": "g", "c": "alone"})
    assert list(stats["group"]) == ["g", "g"]
    assert list(stats["mean"]) == [2.0, 3.0]
    assert list(stats["lo"]) == [1.0, 2.0]
    assert list(stats["hi"]) == [3.0, 4.0]
    assert list(stats["n"]) == [2, 2]


def test_ok_bands_merge_clip_and_mirror():
    pg = series.ok_bands("actor/pg_loss", -0.05, 0.2)  # ok: (-inf, -0.01] and [-0.01, 0.01] merge
    assert pg[["lo", "hi"]].to_dict("records") == [{"lo": -0.05, "hi": 0.01}]
    assert pg["text"][0] == "ok ≤ 0.01"
    kl = series.ok_bands("actor/ppo_kl", -0.01, 0.02)  # judged on |value|: mirrored below 0
    assert kl[["lo", "hi"]].to_dict("records") == [{"lo": 0.001, "hi": 0.01}, {"lo": -0.01, "hi": -0.001}]
    ev = series.ok_bands("critic/vf_explained_var", -0.5, 0.3)  # [0.7, inf): kept visible above the data
    assert ev[["lo", "hi"]].to_dict("records") == [{"lo": 0.7, "hi": pytest.approx(0.78)}]
    assert series.ok_bands("not/a_metric", 0, 1).empty


def test_ok_band_far_from_the_data_becomes_a_note():
    mfu = series.ok_bands("perf/mfu/actor", 0.001, 0.002)  # ok >= 0.3, 300 spans above the data
    assert list(mfu["where"]) == ["above"] and mfu["text"][0] == "ok ≥ 0.3 ↑"
    near = series.ok_bands("perf/mfu/actor", 0.1, 0.25)  # 0.05 away, the span is 0.15: drawn
    assert list(near["where"]) == ["in"]


def test_ok_bands_use_the_family_calibration():
    guide = series.ok_bands("actor/pg_clipfrac", 0.0, 0.5)
    gym = series.ok_bands("actor/pg_clipfrac", 0.0, 0.5, family="gym")
    assert guide[["lo", "hi"]].to_dict("records") == [{"lo": 0.05, "hi": 0.3}]
    assert gym[["lo", "hi"]].to_dict("records") == [{"lo": 0.0, "hi": 0.1}]


def test_attach_status_matches_record_positions():
    long = pd.DataFrame({"run": ["a", "a", "b"], "step": [1, 3, 1], "x": [1, 3, 1], "value": [0.0, 1.0, 2.0],
                         "smoothed": [0.0, 1.0, 2.0], "index": [0, 2, 0]})  # a's step 2 was downsampled away
    marked = series.attach_status(long, {"a": ["ok", "warn", "bad"], "b": None})
    assert list(marked["status"][:2]) == ["ok", "bad"] and pd.isna(marked["status"][2])


def test_largest_jumps_are_the_drawn_lines_biggest_steps_in_step_order():
    long = pd.DataFrame({"step": [1, 2, 3, 5, 6, 7], "x": [1, 2, 3, 5, 6, 7],
                         "value": [0.0, 0.1, 0.9, 0.8, np.inf, 0.2]})
    jumps = series.largest_jumps(long, n=2)
    # 2 -> 3 (+0.8) and 5 -> 7 (-0.6: the non-finite step is no point of the line); a logged gap is no jump
    assert list(jumps["step"]) == [3, 7]
    assert list(jumps["change"].round(6)) == [0.8, -0.6]
    assert series.largest_jumps(long.iloc[:1]).empty


def test_a_flat_line_has_no_jumps_not_rows_of_nan():
    """A constant line (a token score of 0 throughout) gives no jump: the flat steps do not come back as NaN rows."""
    long = pd.DataFrame({"step": [1, 2, 3, 4], "x": [1, 2, 3, 4], "value": [0.0, 0.0, 0.0, 0.0]})
    assert series.largest_jumps(long).empty
    long["value"] = [0.0, 0.0, 0.5, 0.5]  # one jump among flat steps: only it
    jumps = series.largest_jumps(long)
    assert list(jumps["step"]) == [3] and list(jumps["change"]) == [0.5]
