"""Issue 51: three shapes the run doctor misread, each on a log written for its test, with its near misses:
a flat score called a plateau where it had converged, truncation warned too early in a run that learns, and an
agent run whose responses (tool replies included) fill their budget while the score stops rising."""

from __future__ import annotations

from playground.diagnose.engine import diagnose
from playground.diagnose.readers import parse_verl_text
from playground.diagnose.sources import diagnose_read

from .test_issue25_rules import console, steps

HIGH = {"critic/score/max": 1.0, "critic/score/min": 0.0}  # a 0/1 reward: the batch's best sample scores 1


def _noisy(level: float):
    """A score that rose to `level` in 10 steps, then holds it within a little noise."""
    return lambda s: min(level, 0.1 + level * s / 10) + 0.01 * (s % 3)


def _validation(values: dict[int, float]):
    return lambda s: values.get(s)


# ---- 1. plateau or converged ---------------------------------------------------------------------------------
def test_a_long_baseline_flat_at_0_7_beside_a_flat_validation_has_converged_not_plateaued():
    """The issue's run: a PPO baseline whose score rose, then sits at 0.7 for most of 120 steps, its validation
    flat too. No evidence that it should still rise: converged (info), and the run is healthy."""
    val = _validation({s: 0.68 + 0.002 * (s % 2) for s in range(10, 121, 10)})
    records = steps(120, **HIGH, **{"critic/score/mean": _noisy(0.7), "val-core/gsm8k/reward/mean@1": val})
    report = diagnose_read(parse_verl_text(console(records)))
    assert "plateau" not in report.ids() and "converged" in report.ids()
    converged = next(f for f in report.findings if f.id == "converged")
    assert converged.severity == "info" and "healthy" in report.ids()


def test_a_score_flat_from_the_start_is_a_plateau():
    """Never rose: 0.3 from the first step to the last, below the batch's best."""
    records = steps(60, **HIGH, **{"critic/score/mean": lambda s: 0.3 + 0.01 * (s % 3)})
    report = diagnose(records, family="llm")
    assert "plateau" in report.roots() and "converged" not in report.ids()


def test_a_flat_score_far_below_its_own_validation_is_a_plateau():
    """The training score rose to 0.3 and holds there while the held-out score (flat) sits at 0.8: the policy
    solves the task's held-out prompts, the training reward should be able to follow. The same run beside a
    validation at 0.35 (the levels are the task's, not a fixed ceiling) has converged."""
    far = _validation({s: 0.8 + 0.002 * (s % 2) for s in range(10, 81, 10)})
    records = steps(80, **HIGH, **{"critic/score/mean": _noisy(0.3), "val-core/math/reward/mean@1": far})
    assert "plateau" in diagnose_read(parse_verl_text(console(records))).roots()
    near = _validation({s: 0.35 + 0.002 * (s % 2) for s in range(10, 81, 10)})
    records = steps(80, **HIGH, **{"critic/score/mean": _noisy(0.3), "val-core/math/reward/mean@1": near})
    report = diagnose_read(parse_verl_text(console(records)))
    assert "plateau" not in report.ids() and "converged" in report.ids()


def test_a_flat_score_early_in_its_schedule_is_a_plateau_only_where_the_log_says_the_schedule():
    """verl prints `Total training steps: N` before training: 60 steps of 500 is early, the flat score should still
    rise. The same log without that line says nothing of its schedule: no claim, converged. 60 of 100: late."""
    records = steps(60, **HIGH, **{"critic/score/mean": _noisy(0.5)})
    assert parse_verl_text("(TaskRunner pid=7) Total training steps: 500\n" + console(records)).total_steps == 500
    early = diagnose_read(parse_verl_text("Total training steps: 500\n" + console(records)))
    assert "plateau" in early.roots()
    unknown = diagnose_read(parse_verl_text(console(records)))
    assert "plateau" not in unknown.ids() and "converged" in unknown.ids()
    late = diagnose_read(parse_verl_text("Total training steps: 100\n" + console(records)))
    assert "plateau" not in late.ids() and "converged" in late.ids()


def test_the_playground_run_json_gives_the_schedule():
    records = steps(60, **HIGH, **{"critic/score/mean": _noisy(0.5)})
    assert "plateau" in diagnose(records, family="llm", info={"total_steps": 400}).roots()
    assert "plateau" not in diagnose(records, family="llm", info={"total_steps": 60}).ids()


def test_a_score_that_still_rises_is_neither_plateau_nor_converged():
    records = steps(60, **HIGH, **{"critic/score/mean": lambda s: 0.1 + 0.01 * s})
    report = diagnose(records, family="llm", info={"total_steps": 400})
    assert not {"plateau", "converged"} & set(report.ids())


# ---- 2. truncation in a run that learns ------------------------------------------------------------------------
def test_truncation_at_0_31_and_rising_in_a_run_that_learns_is_no_warning():
    """Near miss: the cut share climbs 0.05 -> 0.31 while the score rises: inside the guide's acceptable band's
    reach, below issue 51's line (0.4 and rising)."""
    records = steps(40, **{"response_length/clip_ratio": lambda s: 0.05 + 0.0067 * (s - 1),
                           "response_length/max": 2048.0})
    assert records[-1]["response_length/clip_ratio"] < 0.32
    report = diagnose(records, family="llm")
    assert "response_truncation" not in report.ids()


def test_truncation_at_0_4_and_rising_warns_and_at_0_5_whatever_the_trend():
    rising = steps(40, **{"response_length/clip_ratio": lambda s: 0.1 + 0.008 * s, "response_length/max": 2048.0})
    assert rising[-1]["response_length/clip_ratio"] >= 0.4
    assert "response_truncation" in diagnose(rising, family="llm").roots()
    # flat at the guide's line (§4.2: "> 0.5: raise max_response_length"), the score rising: warned
    flat = steps(40, **{"response_length/clip_ratio": lambda s: 0.52 + 0.01 * (s % 2), "response_length/max": 2048.0})
    assert "response_truncation" in diagnose(flat, family="llm").roots()
    # flat at 0.45, between the lines, not rising: no warning
    between = steps(40, **{"response_length/clip_ratio": lambda s: 0.45 + 0.01 * (s % 2),
                           "response_length/max": 2048.0})
    assert "response_truncation" not in diagnose(between, family="llm").ids()


# ---- 3. an agent run's responses fill their budget -------------------------------------------------------------
def _agent(n: int = 40, *, turns=4.0, score=lambda s: min(0.35, 0.1 + 0.025 * s), tools: float | None = 1.5):
    """A multi-turn tool run: the mean response (tool replies included) climbs from 1200 to 3900 tokens of a
    4096 budget; the longest at the budget from step 5 on; clip_ratio low (episodes stop between turns)."""
    over = {"training/num_turns/mean": turns, "critic/score/mean": score,
            "response_length/mean": lambda s: 1200.0 + 2700.0 * min(s, 30) / 30 + 5 * (s % 2),
            "response_length/max": lambda s: 4096.0 if s >= 5 else 3000.0 + 200 * s,
            "response_length/clip_ratio": 0.02, "tool_call_counts/mean": tools}
    return steps(n, **HIGH, **over)


def test_an_agent_run_whose_responses_fill_the_budget_while_the_score_flattens_is_truncation():
    report = diagnose_read(parse_verl_text(console(_agent())))
    assert "response_truncation" in report.roots()
    finding = next(f for f in report.findings if f.id == "response_truncation")
    assert "max_tool_response_length" in finding.fix
    # the run's verl names: num_turns/* (the legacy trainer's) read as training/num_turns/*, no tool counts logged
    legacy = [{("num_turns/mean" if k == "training/num_turns/mean" else k): v for k, v in r.items()
               if k != "tool_call_counts/mean"} for r in _agent()]
    assert "response_truncation" in diagnose_read(parse_verl_text(console(legacy))).roots()


def test_an_agent_run_filling_its_budget_while_the_score_still_rises_is_no_truncation():
    report = diagnose(_agent(score=lambda s: 0.1 + 0.015 * s), family="llm")
    assert "response_truncation" not in report.ids()


def test_a_single_turn_run_whose_length_climbs_to_its_longest_is_not_the_agent_rule():
    """num_turns 2 (verl's single exchange, logged by every agent-loop rollout), no tool calls: the agent rule says
    nothing; the single-turn rules judge it by its clip_ratio (0.02 here: no warning)."""
    report = diagnose(_agent(turns=2.0, tools=0.0), family="llm")
    assert "response_truncation" not in report.ids()
    no_turns = [{k: v for k, v in r.items() if k not in ("training/num_turns/mean", "tool_call_counts/mean")}
                for r in _agent()]
    assert "response_truncation" not in diagnose(no_turns, family="llm").ids()
