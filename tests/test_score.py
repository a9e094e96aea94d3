"""Tests for `playground/rundir/score.py`: the one score the diagnosis, the sweeper, the workshop and the explorer
read."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from playground.metrics import STEP
from playground.rundir.score import final_score, records_score, run_score, score_metric


def test_the_declared_score_metric_wins_where_it_is_logged():
    gym = {"score_metric": "critic/score/mean", "family": "gym"}
    assert score_metric(gym, {"critic/score/mean", "val/score"}) == "critic/score/mean"
    assert score_metric({"score_metric": "val/accuracy", "family": "token"}, {"val/accuracy", "val/score"}) \
        == "val/accuracy"
    # no declaration (an external log, an older run): greedy validation for a token task or without a train score
    assert score_metric({"family": "token"}, {"critic/score/mean", "val/score"}) == "val/score"
    assert score_metric({}, {"val/score"}) == "val/score"
    assert score_metric(None, {"critic/score/mean", "val/score"}) == "critic/score/mean"


def test_the_score_is_the_last_finite_value_of_frames_and_records():
    df = pd.DataFrame({STEP: np.arange(1.0, 21.0), "critic/score/mean": [*np.arange(19.0), math.nan],
                       "val/score": [math.nan] * 19 + [7.0]})
    gym = {"score_metric": "critic/score/mean"}
    assert final_score(df, gym) == 18.0  # the last finite value, not a tail mean: what stop_on_score judged
    assert final_score(df, {"family": "token"}) == 7.0
    assert final_score(pd.DataFrame({STEP: [1.0]}), gym) is None
    records = [{STEP: 1.0, "critic/score/mean": 3.0}, {STEP: 2.0, "critic/score/mean": math.inf}, {STEP: 3.0}]
    assert records_score(records, gym) == 3.0 and records_score([], gym) is None


def test_run_score_reads_run_json_and_metrics(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"score_metric": "val/accuracy", "family": "token"}))
    lines = [{STEP: 1, "val/accuracy": 0.5, "val/score": 0.9}, {STEP: 2, "val/accuracy": 0.75}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert run_score(tmp_path) == 0.75
