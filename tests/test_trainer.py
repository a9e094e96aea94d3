"""The trainer's own contract (`playground/step/trainer.py`): the step's phases, when the actor starts, how a run stops
(diverged, on its score), and verl's learning-rate schedule stepped once per update call."""

import math

import pytest

from playground.rundir.runs import read_metrics_jsonl, read_run_info

SMALL = ["task=cartpole", "env.num_envs=4", "env.rollout_length=16", "actor_rollout_ref.actor.ppo_mini_batch_size=32",
         "env.eval_episodes=4"]


def test_non_finite_losses_end_the_run_as_diverged(train_run, monkeypatch):
    from playground.tasks.gym_task import GymTask

    real = GymTask.generate

    def poisoned(self, agents=None, policy=None):
        batch = real(self, agents, policy)
        batch["token_level_scores"] = batch["token_level_scores"] * float("nan")  # a broken reward
        return batch

    monkeypatch.setattr(GymTask, "generate", poisoned)
    fitted, run_dir = train_run([*SMALL, "trainer.total_training_steps=20"])
    info = read_run_info(run_dir)
    records = read_metrics_jsonl(run_dir / "metrics.jsonl").records
    assert info["status"] == "diverged" and "non-finite" in info["error"]
    assert len(records) == 3 and math.isnan(records[-1]["actor/pg_loss"])  # every metric so far is kept
    assert fitted.statuses == ["diverged"]
    [outcome] = fitted.outcomes
    assert outcome.steps == 3 and outcome.error == info["error"] and outcome.stop_reason is None


def test_critic_warmup_updates_only_the_critic_before_that_step(train_run):
    """verl: the actor is updated from `global_steps >= critic_warmup` on; steps start at 1."""
    _, run_dir = train_run([*SMALL, "trainer.total_training_steps=4", "trainer.critic_warmup=3"])
    records = read_metrics_jsonl(run_dir / "metrics.jsonl").records
    assert [r["training/global_step"] for r in records] == [1, 2, 3, 4]
    assert ["actor/pg_clipfrac" in r for r in records] == [False, False, True, True]
    assert all("critic/vf_loss" in r for r in records)


def test_a_validated_stop_needs_the_validation_score_too(train_run):
    _, run_dir = train_run([*SMALL, "trainer.total_training_steps=40", "trainer.stop_on_score=30",
                            "trainer.stop_on_score_validated=true"])
    records, info = read_metrics_jsonl(run_dir / "metrics.jsonl").records, read_run_info(run_dir)
    assert info["stop_reason"] == "stop_on_score: critic/score/mean and val/score reached 30"
    assert records[-1]["critic/score/mean"] >= 30 and records[-1]["val/score"] >= 30
    assert all(r["val/score"] < 30 for r in records[:-1] if r.get("critic/score/mean", 0) >= 30)


@pytest.mark.parametrize("epochs", [1, 3])
def test_the_lr_schedule_steps_once_per_update_call_not_per_optimizer_step(train_run, epochs):
    """verl steps each scheduler once per training step, however many mini-batches and epochs the update has."""
    _, run_dir = train_run([*SMALL, "trainer.total_training_steps=4", f"actor_rollout_ref.actor.ppo_epochs={epochs}",
                            "actor_rollout_ref.actor.optim.lr_scheduler_type=cosine",
                            "actor_rollout_ref.actor.optim.lr=1e-3", "critic.optim.lr_scheduler_type=constant"])
    records = read_metrics_jsonl(run_dir / "metrics.jsonl").records
    lrs = [r["actor/lr"] for r in records]
    expected = [1e-3 * 0.5 * (1 + math.cos(math.pi * s / 4)) for s in range(4)]  # cosine to 0 over 4 steps
    assert lrs == pytest.approx(expected, rel=1e-5)
    assert [r["critic/lr"] for r in records] == pytest.approx([2.5e-3] * 4)


def test_the_step_times_every_phase_it_ran(train_run):
    _, run_dir = train_run([*SMALL, "trainer.total_training_steps=2", "actor_rollout_ref.actor.use_kl_loss=true"])
    record = read_metrics_jsonl(run_dir / "metrics.jsonl").records[-1]
    phases = {k.split("/", 1)[1] for k in record if k.startswith("timing_s/")}
    assert {"gen", "reward", "old_log_prob", "ref", "values", "adv", "update_critic", "update_actor", "step"} <= phases
    parts = sum(record[f"timing_s/{p}"] for p in phases - {"step", "testing"})
    assert parts <= record["timing_s/step"] * 1.01  # the phases lie inside the step


def test_nothing_on_the_step_path_calls_back_into_the_trainer():
    """The step calls down: the workers, the task, the advantage, dynamic sampling, the stop rules and the record
    never import the trainer (docs/step.md)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "playground"
    path = ["step/workers.py", "step/advantage.py", "step/dynamic_sampling.py", "step/stopping.py", "step/records.py",
            "step/update.py", "step/hparams.py", "tasks/base.py", "tasks/gym_task.py", "tasks/token_task.py",
            "tasks/token_reward.py", "rollout/decode.py", "rollout/turns.py", "rollout/weights.py",
            "step/rollout_correction.py"]
    for name in path:
        tree = ast.parse((root / name).read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        assert not imported & {"playground.step.trainer", "playground.train"}, name


def test_every_file_docs_step_md_names_exists():
    """The step's walk-through points at files by their path under playground/: each one is there."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    text = (root / "docs" / "step.md").read_text()
    named = set(re.findall(r"`((?:[a-z_]+/)*[a-z_]+(?:\.py|/))`", text))
    assert named, "docs/step.md names no file"
    missing = sorted(p for p in named if not (root / "playground" / p.removeprefix("playground/")).exists())
    assert not missing, f"docs/step.md names files that are not under playground/: {missing}"
