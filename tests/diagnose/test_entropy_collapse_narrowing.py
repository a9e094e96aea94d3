"""`entropy_collapse_narrowing`: the slow collapse of math RL (countdown on 16 prompts): the entropy below half its
first step's, pass@16 below its value before training while the score stalls below its target. Not a healthy run's
fall of a fifth, not a run that still learns, not a narrowing that keeps what the base could reach, and n/a on a log
without pass@16."""

from __future__ import annotations

import math

import pytest

from playground.diagnose.engine import diagnose
from playground.diagnose.log import Log
from playground.diagnose.series import compile_series
from playground.metrics import STEP

COUNTDOWN = {"score_metric": "val/accuracy", "score_target": 0.6, "max_entropy": 3.332}


def steps(n: int = 120, entropy_end: float = 0.09, accuracy=lambda s: 0.40 + 0.0002 * s,
          pass16=lambda s: 0.984 - 0.0012 * s, with_pass16: bool = True) -> list[dict[str, float]]:
    """n GRPO steps shaped as dev seed 1 of `task=countdown scenario=entropy_collapse`: the entropy falls from 0.22
    towards entropy_end, fast at first; the training score saturating; validation every 10 steps (step 0: the
    base's)."""
    records = []
    for s in range(0, n + 1):
        r = {STEP: float(s)}
        if s:
            r |= {"actor/entropy": entropy_end + (0.22 - entropy_end) * math.exp(-s / 40),
                  "critic/score/mean": min(0.6 + 0.01 * s, 0.99),
                  "actor/ppo_kl": 0.0001, "actor/pg_clipfrac": 0.0, "actor/grad_norm": 0.3, "actor/pg_loss": 0.0,
                  "response_length/mean": 41.0 - 0.1 * s}
        if s % 10 == 0:
            r["val/accuracy"] = 0.381 if s == 0 else accuracy(s)
            if with_pass16:
                r["val/pass@16"] = pass16(s)
        records.append(r)
    return records


def _found(records) -> list[str]:
    return [f.rule for f in diagnose(records, family="token", info=COUNTDOWN).findings if f.id == "entropy_collapse"]


def test_the_slow_collapse_is_found_as_the_root():
    report = diagnose(steps(), family="token", info=COUNTDOWN)
    assert report.roots()[0] == "entropy_collapse"
    (finding,) = [f for f in report.findings if f.id == "entropy_collapse"]
    assert finding.rule == "entropy_collapse_narrowing" and 70 <= finding.first_step <= 115
    # the entropy keeps more than a quarter of its start (0.23 -> 0.07): narrowed, not over-fit (no second root)
    assert "overly_deterministic" not in report.ids()


def test_a_healthy_fall_of_a_fifth_is_not_a_collapse():
    assert _found(steps(entropy_end=0.18, pass16=lambda s: 0.98)) == []


def test_a_run_still_learning_is_not_a_collapse():
    assert _found(steps(accuracy=lambda s: 0.38 + 0.0018 * s)) == []


def test_a_sharpening_that_keeps_what_the_base_could_reach_is_not_a_collapse():
    assert _found(steps(pass16=lambda s: 0.984 - 0.0001 * s)) == []


def test_without_pass_at_16_the_rule_cannot_judge():
    assert "entropy_collapse_narrowing" not in _found(steps(with_pass16=False))


def test_start_is_the_first_known_value_at_every_step():
    log = Log({})
    for r in steps(n=20):
        log.append(r)
    start = compile_series({"start": "val/pass@16"}, {})
    assert [start.value(log, i) for i in (0, 5, 20)] == [pytest.approx(0.984)] * 3
    first_entropy = 0.09 + 0.13 * math.exp(-1 / 40)
    assert compile_series({"start": "actor/entropy"}, {}).value(log, 0) == pytest.approx(first_entropy)
