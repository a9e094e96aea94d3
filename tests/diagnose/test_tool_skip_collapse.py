"""`tool_skip_collapse`: a multi-turn tool task's policy stops calling its tool (verl PR #4998: training/num_turns/mean
"quickly collapses to 2", tool_call_counts/mean to 0) while the score stays flat or falls; the root over the
no_learning_signal its one-turn groups leave, and no_learning_signal still the root where no tool collapsed."""

from __future__ import annotations

from playground.diagnose.engine import diagnose
from playground.metrics import STEP


def steps(n: int = 20, collapse: bool = True, agent_loop: bool = True, **over) -> list[dict[str, float]]:
    """n steps of a GRPO tool task: the tool called on a quarter of the episodes, falling to none by step 5
    (`collapse`), or kept; from step 3 every reward of a step is alike (the groups' spread gone) where it collapses;
    `agent_loop` False drops verl's agent loop metrics (a single-turn log); `over` replaces a metric."""
    records = []
    for s in range(1, n + 1):
        calls = max(0.0, 0.25 - 0.05 * s) if collapse else 0.25
        silent = collapse and s >= 3
        r = {STEP: float(s), "actor/pg_clipfrac": 0.0, "actor/ppo_kl": 0.0, "actor/entropy": 0.4,
             "actor/grad_norm": 0.0 if silent else 0.3, "actor/pg_loss": 0.0, "critic/score/mean": 0.0,
             "critic/rewards/mean": 0.0, "critic/rewards/std": 0.0 if silent else 0.3,
             "critic/rewards/max": 0.0 if silent else 1.0, "critic/rewards/min": 0.0,
             "critic/advantages/max": 0.0 if silent else 1.5, "critic/advantages/min": 0.0 if silent else -1.5,
             "critic/advantages/mean": 0.0}
        if agent_loop:
            r |= {"training/num_turns/mean": 2.0 + 2.0 * calls, "tool_call_counts/mean": calls}
        for key, value in over.items():
            r[key] = value(s) if callable(value) else value
        records.append(r)
    return records


def roots(report) -> list[str]:
    return [d.root.id for d in report.diagnoses if d.root.severity != "info"]


def test_the_collapse_is_the_root_over_the_silence_it_leaves():
    report = diagnose(steps(), family="llm")
    assert roots(report)[0] == "tool_skip_collapse"
    (first,) = [d for d in report.diagnoses if d.root.id == "tool_skip_collapse"]
    assert "no_learning_signal" in [f.id for f in first.consequences]


def test_without_the_agent_loop_the_silence_is_its_own_root():
    report = diagnose(steps(agent_loop=False), family="llm")
    assert "tool_skip_collapse" not in report.ids() and roots(report)[0] == "no_learning_signal"


def test_a_score_that_rises_only_by_avoiding_a_penalty_is_no_rise():
    # calc under an overlong buffer: critic/score/mean -0.25 -> 0.0 while no answer is right
    dodging = steps(**{"critic/score/mean": lambda s: min(0.0, -0.25 + 0.05 * s)})
    assert "tool_skip_collapse" in diagnose(dodging, family="llm").ids()
    # a policy that learned to answer without its tool scores above 0: no failure
    learning = steps(**{"critic/score/mean": lambda s: 0.05 * s, "critic/rewards/max": 1.0})
    assert "tool_skip_collapse" not in diagnose(learning, family="llm").ids()


def test_a_policy_that_never_called_its_tool_shows_no_collapse():
    never = steps(**{"training/num_turns/mean": 2.0, "tool_call_counts/mean": 0.0})
    assert "tool_skip_collapse" not in diagnose(never, family="llm").ids()
    kept = steps(collapse=False)
    assert "tool_skip_collapse" not in diagnose(kept, family="llm").ids()


def test_a_token_task_reads_its_greedy_validation_score():
    flat = steps(**{"val/score": 0.0})
    assert "tool_skip_collapse" in diagnose(flat, family="token", info={"score_target": 0.6}).ids()
    solved = steps(**{"val/score": 0.9})  # at the target: answering in its head is what the task asked
    assert "tool_skip_collapse" not in diagnose(solved, family="token", info={"score_target": 0.6}).ids()
