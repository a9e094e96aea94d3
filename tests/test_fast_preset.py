"""`+preset=fast`: CartPole solved fast (benchmarks/bench_batched.py measures the seconds).

Solved means a 10-episode training mean ≥ 475 and a 100-episode greedy `val/score` ≥ 475, measured as the run
stops (`trainer.stop_on_score`). Here: the preset's shape, one seed's stop at its solve point, and (slow) 5 seeds.
"""

from __future__ import annotations

import json
import statistics

import pytest

from playground.config import compose

FAST = ["task=cartpole", "+preset=fast"]


def _run(train_run, seed: int, cap: int = 150):
    trainer, run_dir = train_run([*FAST, f"trainer.seed={seed}", f"trainer.total_training_steps={cap}"])
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return records, json.loads((run_dir / "run.json").read_text())


def test_the_preset_takes_four_gradient_steps_per_rollout():
    cfg = compose(FAST)
    actor, critic = cfg.actor_rollout_ref.actor, cfg.critic
    rows = cfg.env.num_envs * cfg.env.rollout_length
    assert (cfg.env.num_envs, cfg.env.rollout_length) == (16, 32)
    assert actor.ppo_mini_batch_size == critic.ppo_mini_batch_size == rows // 2 == 256
    assert actor.ppo_epochs == critic.ppo_epochs == 2
    assert actor.optim.lr == critic.optim.lr == 7e-3
    assert actor.optim.lr_scheduler_type == critic.optim.lr_scheduler_type == "constant"
    assert cfg.trainer.stop_on_score == cfg.task.score_target == 475 and cfg.trainer.stop_on_score_validated


def test_a_run_stops_at_its_solve_point(train_run):
    records, info = _run(train_run, seed=10)
    last = records[-1]
    assert info["status"] == "finished" and info["stop_reason"].startswith("stop_on_score")
    assert last["training/global_step"] < 150  # well before the cap
    assert last["critic/score/mean"] >= 475 and last["val/score"] >= 475  # validated as it stops
    # every earlier step at the training target was validated and fell short
    earlier = [r for r in records[:-1] if r.get("critic/score/mean", 0) >= 475]
    assert all(r["val/score"] < 475 for r in earlier)


@pytest.mark.slow
def test_five_seeds_solve_both_criteria(train_run):
    solved_at = []
    for seed in range(1, 6):
        records, _ = _run(train_run, seed, cap=300)
        last = records[-1]
        if last.get("critic/score/mean", 0) >= 475 and last.get("val/score", 0) >= 475:
            solved_at.append(last["training/global_step"])
    assert len(solved_at) == 5, solved_at  # every seed solves (20 of 20 seeds in docs/tuning.md)
    assert statistics.median(solved_at) <= 150
