"""verl's `reduce_metrics` and the JSON encoding of non-finite values."""

import math

import numpy as np
import pytest

from playground.metrics import from_json_value, reduce_agent_metrics, reduce_metrics, to_json_value


def test_reduce_metrics_takes_max_min_or_mean_by_name():
    reduced = reduce_metrics({
        "actor/pg_loss": [1.0, 2.0, 6.0],
        "response_length/max": [3, 9, 4],
        "response_length/min": [3, 9, 4],
        "critic/lr": 0.5,
        "actor/empty": [],
    })
    assert reduced == {"actor/pg_loss": 3.0, "response_length/max": 9.0, "response_length/min": 3.0,
                       "critic/lr": 0.5}


@pytest.mark.parametrize("entries", [1, 3, 8, 9, 16, 37])
def test_reducing_all_agents_at_once_gives_each_agent_its_solo_bits(entries):
    """The batched trainer reduces a `(n, K)` table per metric; numpy's pairwise sums must not change any bit."""
    table = np.random.default_rng(entries).standard_normal((entries, 5)).astype(np.float32)
    names = ["actor/pg_loss", "response_length/max", "response_length/min"]
    reduced = reduce_agent_metrics({name: table for name in names})
    for k in range(5):
        solo = reduce_metrics({name: table[:, k].tolist() for name in names})
        assert {name: reduced[name][k] for name in names} == solo


@pytest.mark.parametrize("value,encoded", [(float("nan"), "NaN"), (float("inf"), "Infinity"),
                                           (float("-inf"), "-Infinity"), (1.5, 1.5)])
def test_non_finite_values_round_trip_through_json_strings(value, encoded):
    assert to_json_value(value) == encoded
    decoded = from_json_value(encoded)
    assert decoded == value or (math.isnan(value) and math.isnan(decoded))


def test_the_rollout_engine_and_its_correction_are_one_panel_group():
    """The Panels page shows the rollout-vs-trainer probes, the staleness and verl's rollout_corr/* in one group."""
    from playground.metrics import GROUP_TITLES, group_of

    keys = ["training/rollout_probs_diff_mean", "training/off_policy/trajectory_staleness/mean", "rollout_corr/kl",
            "rollout_corr/rollout_log_ppl", "rollout_corr/rollout_is_seq_mean"]
    assert {group_of(k) for k in keys} == {"rollout"}
    assert [g for g in GROUP_TITLES if g.startswith("rollout")] == ["rollout"]
