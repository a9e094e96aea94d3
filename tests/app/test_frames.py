"""Tests for `app/frames.py`: TensorBoard smoothing, wall time, downsampling, seed groups, bands, sweeps, fixes."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from playground.metrics import STEP

import frames


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
    out = frames.smooth_ema([1.0, 2.0, math.nan, 4.0], 0.5)
    assert out[0] == pytest.approx(1.0)
    assert out[1] == pytest.approx(5 / 3)
    assert math.isnan(out[2])
    assert out[3] == pytest.approx(3.0)


def test_smooth_ema_matches_tensorboard_loop():
    values = list(np.random.default_rng(0).normal(size=200)) + [math.inf] + [1.0, 2.0]
    np.testing.assert_allclose(frames.smooth_ema(values, 0.9), _tensorboard_ema(values, 0.9))


def test_smooth_ema_zero_weight_and_constant():
    assert list(frames.smooth_ema([3.0, 1.0], 0.0)) == [3.0, 1.0]
    np.testing.assert_allclose(frames.smooth_ema([2.0] * 5, 0.99), [2.0] * 5)  # the debias keeps a constant
    assert frames.smooth_ema([], 0.6).size == 0


def test_ema_window():
    assert frames.ema_window(0.0) == 20
    assert frames.ema_window(0.6) == 20  # 0.6**14 < 1e-3: the floor of 20 wins
    assert frames.ema_window(0.99) == math.ceil(math.log(1e-3) / math.log(0.99))  # 688


def test_wall_time_prefers_timestamps_then_step_time():
    df = pd.DataFrame({STEP: [1.0, 2.0, 3.0], "perf/time_per_step": [2.0, math.nan, 4.0]})
    assert list(frames.wall_time(df)) == [2.0, 5.0, 9.0]  # NaN filled with the median (3.0)
    df["timestamp"] = [100.0, 110.0, 125.0]
    assert list(frames.wall_time(df)) == [0.0, 10.0, 25.0]
    assert frames.wall_time(pd.DataFrame({STEP: [1.0]})) is None


def test_downsample_keeps_extremes_and_non_finite():
    values = np.sin(np.linspace(0, 20, 10_000))
    values[5000], values[7000] = 50.0, math.nan
    kept = frames.downsample_index(values, 1000)
    assert len(kept) <= 1003
    assert {0, 5000, 7000, 9999} <= set(kept)
    assert list(frames.downsample_index(np.arange(5.0), 1000)) == [0, 1, 2, 3, 4]


def test_metric_long_smooths_before_downsampling():
    df = pd.DataFrame({STEP: np.arange(1.0, 3001.0), "m": np.arange(3000.0), "perf/time_per_step": 0.5})
    long = frames.metric_long({"a": df, "b": df.drop(columns="m")}, "m", x_mode="wall", weight=0.5, max_points=100)
    assert set(long["run"]) == {"a"}  # a run without the metric draws nothing
    assert len(long) <= 103
    last = long.iloc[-1]
    assert last["x"] == pytest.approx(1500.0)  # 3000 steps x 0.5 s
    assert last["smoothed"] == pytest.approx(frames.smooth_ema(df["m"].to_numpy(), 0.5)[-1])


def test_group_stats_mean_min_max_of_groups_of_two_or_more():
    long = pd.DataFrame({"run": ["a", "a", "b", "b", "c"], "step": [1, 2, 1, 2, 1], "x": [1, 2, 1, 2, 1],
                         "value": [1.0, 2.0, 3.0, 4.0, 9.0], "smoothed": [1.0, 2.0, 3.0, 4.0, 9.0]})
    stats = frames.group_stats(long, {"a": "g", "b": "g", "c": "alone"})
    assert list(stats["group"]) == ["g", "g"]
    assert list(stats["mean"]) == [2.0, 3.0]
    assert list(stats["lo"]) == [1.0, 2.0]
    assert list(stats["hi"]) == [3.0, 4.0]
    assert list(stats["n"]) == [2, 2]


def test_ok_bands_merge_clip_and_mirror():
    pg = frames.ok_bands("actor/pg_loss", -0.05, 0.2)  # ok: (-inf, -0.01] and [-0.01, 0.01] merge
    assert pg[["lo", "hi"]].to_dict("records") == [{"lo": -0.05, "hi": 0.01}]
    assert pg["text"][0] == "ok ≤ 0.01"
    kl = frames.ok_bands("actor/ppo_kl", -0.01, 0.02)  # judged on |value|: mirrored below 0
    assert kl[["lo", "hi"]].to_dict("records") == [{"lo": 0.001, "hi": 0.01}, {"lo": -0.01, "hi": -0.001}]
    ev = frames.ok_bands("critic/vf_explained_var", -0.5, 0.3)  # [0.7, inf): kept visible above the data
    assert ev[["lo", "hi"]].to_dict("records") == [{"lo": 0.7, "hi": pytest.approx(0.78)}]
    assert frames.ok_bands("not/a_metric", 0, 1).empty


def test_ok_band_far_from_the_data_becomes_a_note():
    mfu = frames.ok_bands("perf/mfu/actor", 0.001, 0.002)  # ok >= 0.3, 300 spans above the data
    assert list(mfu["where"]) == ["above"] and mfu["text"][0] == "ok ≥ 0.3 ↑"
    near = frames.ok_bands("perf/mfu/actor", 0.1, 0.25)  # 0.05 away, the span is 0.15: drawn
    assert list(near["where"]) == ["in"]


def test_ok_bands_use_the_family_calibration():
    guide = frames.ok_bands("actor/pg_clipfrac", 0.0, 0.5)
    gym = frames.ok_bands("actor/pg_clipfrac", 0.0, 0.5, family="gym")
    assert guide[["lo", "hi"]].to_dict("records") == [{"lo": 0.05, "hi": 0.3}]
    assert gym[["lo", "hi"]].to_dict("records") == [{"lo": 0.0, "hi": 0.1}]


def test_attach_status_matches_record_positions():
    long = pd.DataFrame({"run": ["a", "a", "b"], "step": [1, 3, 1], "x": [1, 3, 1], "value": [0.0, 1.0, 2.0],
                         "smoothed": [0.0, 1.0, 2.0], "index": [0, 2, 0]})  # a's step 2 was downsampled away
    marked = frames.attach_status(long, {"a": ["ok", "warn", "bad"], "b": None})
    assert list(marked["status"][:2]) == ["ok", "bad"] and pd.isna(marked["status"][2])


def test_overrides_seed_groups_and_differing_params():
    assert frames.parse_overrides(["a=1", "+b.c=x=y", "~d"]) == {"a": "1", "b.c": "x=y", "d": "(deleted)"}
    assert frames.seed_group_key(["lr=1", "seed=0"]) == frames.seed_group_key(["seed=3", "lr=1"])
    assert frames.seed_group_key(["lr=1", "trainer.seed=2"]) == frames.seed_group_key(["lr=1"])
    assert frames.seed_group_key(["lr=1"]) != frames.seed_group_key(["lr=2"])
    table = frames.differing_params({"r1": ["task=c", "lr=1", "seed=0"], "r2": ["task=c", "lr=2"]})
    assert list(table.columns) == ["lr", "seed"]
    assert table.loc["r2", "seed"] == "—"


def test_worst_finding():
    findings = [{"id": "healthy", "severity": "info", "first_step": 1},
                {"id": "b", "severity": "warning", "first_step": 9},
                {"id": "a", "severity": "warning", "first_step": 3}]
    assert frames.worst_finding(findings) == "a"
    assert frames.worst_finding([]) == ""


def _f(fid, severity="warning", first=5):
    return {"id": fid, "severity": severity, "first_step": first, "last_step": 60, "rule": fid}


def test_run_root_is_the_gravest_diagnosis_root_not_the_worst_finding():
    report = {"findings": [], "diagnoses": [
        {"root": _f("lr_too_high"), "consequences": [_f("gradient_explosion", "critical", 9)]},
        {"root": _f("critic_undertrained", "critical", 2), "consequences": []},
        {"root": _f("healthy", "info", 1), "consequences": []}]}
    # both diagnoses hold a critical finding: the first (the report's order) wins, though its root is a warning
    assert frames.run_root(frames.chain(report)) == "lr_too_high"
    assert frames.worst_finding(report["diagnoses"][0]["consequences"] + [report["diagnoses"][1]["root"]]) == (
        "critic_undertrained")
    report["diagnoses"][0]["consequences"] = []  # now the critical one is graver
    assert frames.run_root(frames.chain(report)) == "critic_undertrained"
    assert frames.run_root(frames.chain({"diagnoses": [{"root": _f("healthy", "info"), "consequences": []}],
                                         "findings": [_f("low_mfu", "info")]})) == frames.HEALTHY
    assert frames.run_root([]) == frames.HEALTHY  # no findings: no warning
    # an older report (no diagnoses): its findings alone, the gravest first
    assert frames.run_root(frames.chain({"findings": [_f("kl_drift"), _f("training_crash", "critical", 30)]})) == (
        "training_crash")


def test_most_common_root_ties_by_count_then_guide_order_then_name():
    assert frames.most_common_root(["healthy", "lr_too_high", "lr_too_high"]) == "lr_too_high"
    assert frames.most_common_root(["healthy", "healthy", "lr_too_high"]) == "healthy"  # the majority of seeds
    assert frames.most_common_root(["healthy", "lr_too_high"]) == "lr_too_high"  # healthy loses a tie
    # §11.2: the learning-rate check comes before the critic check, which comes before ids no check names
    assert frames.most_common_root(["entropy_collapse", "critic_undertrained", "lr_too_low"]) == "lr_too_low"
    assert frames.most_common_root(["entropy_collapse", "critic_undertrained"]) == "critic_undertrained"
    assert frames.most_common_root(["overly_deterministic", "entropy_collapse"]) == "entropy_collapse"  # by name
    assert frames.most_common_root(["running", "lr_too_high", "running"]) == "lr_too_high"  # pending jobs wait
    assert frames.most_common_root(["running", "running"]) == "running"
    assert frames.root_counts(["healthy", "lr_too_high", "healthy"]) == "healthy ×2, lr_too_high ×1"


def test_sweep_cells_aggregate_seeds_mean_spread_share_root():
    sweep = pd.DataFrame({
        "run": list("abcdefg"), "lr": ["1e-4"] * 3 + ["1e-2"] * 3 + ["1e-3"], "clip": ["0.2"] * 7,
        "seed": ["1", "2", "3", "1", "2", "3", "1"], "score": [400.0, 460.0, 490.0, 20.0, 300.0, math.nan, 250.0],
        "root": ["healthy", "healthy", "healthy", "lr_too_high", "healthy", "running", "healthy"],
        "healthy": [True, True, True, False, True, None, True]})
    cells = frames.sweep_cells(sweep, "lr", "clip").set_index("x")
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
    strip = frames.sweep_cells(sweep, "lr", None, healthy_text="{k}/{n} 健康")  # a one-knob sweep: one row
    assert set(strip["y"]) == {"—"} and len(strip) == 3 and "3/3 健康" in set(strip["label"].str.split(" · ").str[1])
    assert frames.mean_spread(0.9123, 0.05) == "0.912 ± 0.050" and frames.mean_spread(math.nan, 1.0) == "—"
    seeds = frames.seed_cells(sweep, "lr", "clip", "seed")
    assert list(seeds.columns) == ["x", "y", "seed", "run", "score", "root", "text"]
    assert seeds.loc[3, "text"] == "1: 20.0 · lr_too_high" and seeds.loc[5, "text"] == "3: — · running"


def test_parallel_axes_and_value_order():
    sweep = pd.DataFrame({"run": list("abcd"), "lr": ["1e-4", "1e-4", "1e-2", "1e-2"], "clip": ["0.1", "0.2"] * 2,
                          "score": [1.0, 3.0, 5.0, 7.0], "root": ["healthy", "", "lr_too_high", "lr_too_high"]})
    assert frames.sort_values(["1e-2", "3e-4", "1e-4"]) == ["1e-4", "3e-4", "1e-2"]
    long = frames.parallel_long(sweep, ["lr", "clip"])
    lr = long[long["dim"] == "lr"].set_index("run")["pos"]
    assert (lr["a"], lr["c"]) == (0.0, 1.0)
    assert set(long.columns) == {"run", "dim", "pos", "value", "score", "root"}
    assert long.set_index(["run", "dim"]).loc[("b", "lr"), "root"] == "healthy"


def test_fix_command_later_overrides_win():
    command = frames.fix_command(["task=cartpole", "actor_rollout_ref.actor.optim.lr=3e-2", "tag=a b"],
                                 "actor_rollout_ref.actor.optim.lr=1e-3 +critic.ppo_epochs=2")
    assert command == ("python -m playground.train task=cartpole 'tag=a b' actor_rollout_ref.actor.optim.lr=1e-3 "
                       "+critic.ppo_epochs=2")
    assert frames.fix_command([], "") == "python -m playground.train"
