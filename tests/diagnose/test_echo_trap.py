"""`echo_trap` (RAGEN, Wang et al. 2025): a multi-turn agent repeats one action sequence whatever the state; the
within-group reward spread falls, then the entropy, then the gradient spikes, below the score's target. The root
over what it leaves (a near-deterministic policy, saturated clipping, vanishing gradients); n/a on single-turn logs."""

from __future__ import annotations

import pytest

from playground.diagnose.conditions import compile_condition
from playground.diagnose.engine import diagnose
from playground.diagnose.log import Log
from playground.metrics import STEP

TARGET = {"score_target": 0.6}


def steps(n: int = 30, spike: float = 8.0, score=lambda s: 0.35, multi_turn: bool = True) -> list[dict[str, float]]:
    """A GRPO frozenlake-like run as the trap unfolds: the group reward std 0.4 -> 0.02 by step 10, the entropy
    0.78 -> 0.05 by step 15, a gradient of 0.8 that peaks at `spike` at steps 9 and 13 and is gone from step 20;
    `score(step)` is the validation score; `multi_turn` False drops the agent loop's metrics."""
    records = []
    for s in range(1, n + 1):
        r = {STEP: float(s), "train/group_reward_std/mean": max(0.02, 0.4 - 0.04 * s),
             "actor/entropy": max(0.05, 0.78 - 0.05 * s),
             "actor/grad_norm": 0.0 if s >= 20 else (spike if s in (9, 13) else 0.8),
             "actor/pg_loss": 0.0, "actor/ppo_kl": 0.0, "actor/pg_clipfrac": 0.0, "critic/score/mean": 0.3,
             "critic/rewards/mean": 0.3, "critic/rewards/max": 1.0, "critic/rewards/min": 0.0,
             "critic/advantages/max": 1.0, "critic/advantages/min": -1.0, "critic/advantages/mean": 0.0,
             "val/score": score(s)}
        if multi_turn:
            r |= {"training/num_turns/mean": 9.0, "tool_call_counts/mean": 0.0}
        records.append(r)
    return records


def roots(report) -> list[str]:
    return [d.root.id for d in report.diagnoses if d.root.severity != "info"]


def test_the_trap_is_the_root_over_what_it_leaves():
    report = diagnose(steps(), family="token", info=TARGET | {"max_entropy": 1.6})
    assert roots(report) == ["echo_trap"]
    (trap,) = report.diagnoses[:1]
    assert "overly_deterministic" in [f.id for f in trap.consequences]


def test_single_turn_logs_are_not_judged():
    # the same curves without the agent loop's training/num_turns: a one-answer task has no game to repeat
    assert "echo_trap" not in diagnose(steps(multi_turn=False), family="token", info=TARGET).ids()


def test_no_spike_no_trap():
    # spread and entropy falling while the gradient stays level: the policy settled, nothing broke out
    assert "echo_trap" not in diagnose(steps(spike=0.8), family="token", info=TARGET).ids()


def test_a_run_that_learns_is_no_trap():
    # a healthy game policy also narrows its play as it wins: the score reaches the target
    learning = steps(score=lambda s: min(0.7, 0.35 + 0.03 * s))
    assert "echo_trap" not in diagnose(learning, family="token", info=TARGET).ids()


def test_a_first_rise_that_the_run_gives_back_does_not_clear_it():
    # RAGEN's curves: the success rate rises while the few winning games are reinforced, then falls below its start
    rise_and_fall = steps(score=lambda s: 0.44 if 10 <= s < 20 else (0.34 if s < 10 else 0.28))
    assert "echo_trap" in diagnose(rise_and_fall, family="token", info=TARGET).ids()


@pytest.mark.parametrize(("values", "holds"), [
    ([1.0, 1.0, 5.0, 1.0, 1.0], True),    # 5x its median
    ([1.0, 2.0, 2.5, 2.0, 1.0], False),   # 1.25x
    ([0.0, 0.0, 0.0, 3.0, 0.0], None),    # a window without gradient has no level to spike from
    ([0.0, 0.0, 0.0, 0.0, 0.0], None),
])
def test_spike_is_the_peak_over_the_median(values, holds):
    log = Log({})
    for i, v in enumerate(values):
        log.append({STEP: float(i), "actor/grad_norm": v})
    condition = compile_condition({"spike": "actor/grad_norm", "gt": 3.0}, {}, {})
    assert condition.over(log, range(len(values))) is holds


def test_a_score_still_rising_below_its_target_does_not_hide_it():
    # frozenlake panel seed 102: val/accuracy 0.36 -> 0.53 -> 0.55 while every map's games came to one walk
    rising = steps(score=lambda s: min(0.55, 0.35 + 0.01 * s))
    assert "echo_trap" in diagnose(rising, family="token", info=TARGET).ids()


def test_single_turn_runs_log_two_turns_and_are_not_judged():
    # verl's V1 trainer (and the playground) log training/num_turns/mean = 2 for every single-turn answer
    one_turn = [r | {"training/num_turns/mean": 2.0} for r in steps()]
    assert "echo_trap" not in diagnose(one_turn, family="token", info=TARGET).ids()
