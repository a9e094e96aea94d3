"""verl's `reduce_metrics` and the JSON encoding of non-finite values."""

import math

import pytest

from playground.metrics import from_json_value, reduce_metrics, to_json_value


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


@pytest.mark.parametrize("value,encoded", [(float("nan"), "NaN"), (float("inf"), "Infinity"),
                                           (float("-inf"), "-Infinity"), (1.5, 1.5)])
def test_non_finite_values_round_trip_through_json_strings(value, encoded):
    assert to_json_value(value) == encoded
    decoded = from_json_value(encoded)
    assert decoded == value or (math.isnan(value) and math.isnan(decoded))
