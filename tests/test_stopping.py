"""The stop rules (`playground/step/stopping.py`) as a unit: precedence, the non-finite streak, the score stop; and the
step's settings resolved once into a frozen object (`hparams.StepHParams`)."""

import dataclasses

import pytest
import torch

from playground.config import compose
from playground.config.schema import as_plain_dict
from playground.diagnose.engine import facts
from playground.run_spec import resolve_run
from playground.step.stopping import StopRules


def _rules(*overrides, patience=2, total=5):
    cfg = compose(["task=cartpole", "trainer.logger=[]", *overrides])
    [agent] = resolve_run([cfg], torch.device("cpu")).agents
    return StopRules([agent.stop], [total], patience, "critic/score/mean", "val/score", facts={})


def test_a_non_finite_streak_diverges_and_a_finite_step_resets_it():
    rules = _rules()
    nan = {"actor/pg_loss": float("nan")}
    assert rules.check(0, 1, nan, over_memory=False) is None
    assert rules.check(0, 2, {"actor/pg_loss": 0.1}, over_memory=False) is None  # the streak starts again
    assert rules.check(0, 3, nan, over_memory=False) is None
    stop = rules.check(0, 4, {"critic/vf_loss": float("inf")}, over_memory=False)
    assert (stop.status, stop.error) == ("diverged", "losses stayed non-finite for 2 steps")


def test_divergence_comes_before_memory_and_memory_before_the_last_step():
    rules = _rules(patience=1, total=1)
    assert rules.check(0, 1, {"actor/pg_loss": float("nan")}, over_memory=True).status == "diverged"
    assert rules.check(0, 1, {}, over_memory=True).status == "oom"
    assert rules.check(0, 1, {}, over_memory=False).reason == "total_training_steps reached"


def test_a_score_stop_names_its_metric_and_waits_for_the_validation_when_asked():
    rules = _rules("trainer.stop_on_score=30")
    assert rules.check(0, 1, {"critic/score/mean": 31.0}, over_memory=False).reason == \
        "stop_on_score: critic/score/mean reached 30"
    validated = _rules("trainer.stop_on_score=30", "trainer.stop_on_score_validated=true")
    assert validated.check(0, 1, {"critic/score/mean": 31.0, "val/score": 20.0}, over_memory=False) is None
    assert validated.check(0, 2, {"critic/score/mean": 31.0, "val/score": 30.0}, over_memory=False).reason == \
        "stop_on_score: critic/score/mean and val/score reached 30"


@pytest.mark.parametrize("overrides", [["task=cartpole", "actor_rollout_ref.actor.grad_clip=0.5"],
                                       ["task=reverse", "actor_rollout_ref.actor.grad_clip=null"]])
def test_the_finding_watcher_knows_what_the_diagnosis_reads_from_the_config(overrides):
    cfg = compose([*overrides, "trainer.logger=[]", "trainer.stop_on_finding=lr_too_high"])
    [agent] = resolve_run([cfg], torch.device("cpu")).agents
    task_facts = {"action_space": "discrete", "max_entropy": 0.69}
    [watcher] = StopRules([agent.stop], [5], 2, "critic/score/mean", None, facts=task_facts).watchers
    family = str(cfg.task.family)
    assert watcher.log.facts == facts(task_facts, as_plain_dict(cfg, resolve=True), family)  # a run dir's diagnosis
    assert (watcher.family, watcher.log.facts["score_target"]) == (family, float(cfg.task.score_target))


def test_the_step_settings_are_resolved_once_and_frozen():
    low = "actor_rollout_ref.actor.clip_ratio_low=0.1"
    cfgs = [compose(["task=cartpole", f"actor_rollout_ref.actor.optim.lr={lr}", low]) for lr in (1e-3, 2e-3)]
    hp = resolve_run(cfgs, torch.device("cpu")).step
    assert hp.num_agents == 2 and hp.clip_ratio_low.shape == (2, 1, 1)
    assert torch.allclose(hp.clip_ratio_low.view(-1), torch.tensor([0.1, 0.1]))
    assert torch.equal(hp.clip_ratio_high, hp.clip_ratio)  # null falls back to clip_ratio
    with pytest.raises(dataclasses.FrozenInstanceError):
        hp.critic_warmup = 3
