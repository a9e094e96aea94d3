"""`critic_undertrained_value`: the guide's §11.4 example 3 as it stands, a negative vf_explained_var with the values
far from the returns long after the critic's first steps, whatever the score does (on countdown the policy learns
past a critic stuck at a constant: docs/tuning.md, "critic_undertrained"). Not a healthy token critic, whose
explained variance hovers near 0 on a 0/1 outcome while its values track the returns; not a fresh critic."""

from __future__ import annotations

from playground.diagnose.engine import diagnose
from playground.metrics import STEP


def steps(n: int = 40, values=lambda s: 0.03 + 0.001 * s, ev: float = -0.1, **over) -> list[dict[str, float]]:
    """n PPO steps of countdown with a critic: the returns 0.45 -> 0.6, the score rising; `values(step)` the critic's
    mean prediction (default: stuck near its start, countdown at critic lr 1e-5)."""
    records = []
    for s in range(1, n + 1):
        r = {STEP: float(s), "critic/score/mean": 0.4 + 0.005 * s, "critic/returns/mean": 0.45 + 0.004 * s,
             "critic/values/mean": values(s), "critic/vf_explained_var": ev, "critic/vf_loss": 0.2,
             "actor/ppo_kl": 0.0005, "actor/pg_clipfrac": 0.001, "actor/entropy": 0.22, "actor/grad_norm": 0.4,
             "actor/pg_loss": 0.01 * (-1) ** s}
        for key, value in over.items():
            r[key] = value(s) if callable(value) else value
        records.append(r)
    return records


def test_a_critic_stuck_at_its_start_is_found_while_the_score_rises():
    report = diagnose(steps(), family="token", info={"score_target": 0.6})
    assert [d.root.id for d in report.diagnoses if d.root.severity != "info"] == ["critic_undertrained"]
    (finding,) = [f for f in report.findings if f.id == "critic_undertrained"]
    assert "critic_undertrained_value" in finding.rule and finding.first_step > 10


def test_a_critic_that_tracks_the_returns_level_is_not_undertrained_however_little_it_explains():
    tracking = steps(values=lambda s: 0.43 + 0.004 * s, ev=-0.05)
    assert "critic_undertrained" not in diagnose(tracking, family="token", info={"score_target": 0.6}).ids()


def test_a_fresh_critic_learning_the_level_in_its_first_steps_is_not_undertrained():
    learning = steps(values=lambda s: min(0.45 + 0.004 * s, 0.03 + 0.1 * s), ev=-0.1)
    assert "critic_undertrained" not in diagnose(learning, family="token", info={"score_target": 0.6}).ids()


def test_gym_tasks_keep_the_rule_that_asks_for_a_stall():
    assert "critic_undertrained" not in diagnose(steps(), family="gym", info={"score_target": 0.6}).ids()
