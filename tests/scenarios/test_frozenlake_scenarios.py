"""frozenlake's scenarios: echo_trap, an SFT-sized step (lr 3e-3, 7x the healthy run's) on a quarter of its games a
step, falls into RAGEN's echo trap (the within-group reward spread collapses, then the entropy, then the gradient
spikes); the catalogue's fix clears it. CI trains the scenario once (panel seed 101, stopped at its finding: ~15
steps, ~40 s with the SFT base built, ~45 s more); the fix and the healthy run (60 steps) are `slow`."""

from __future__ import annotations

import pytest
from reports import report as _report
from reports import roots as _roots
from reports import warnings as _warnings

from playground.config import compose

SCENARIO = ["task=frozenlake", "scenario=echo_trap"]
SEED = 101


def test_the_scenario_is_the_healthy_run_with_an_sft_sized_step_on_a_quarter_of_the_games():
    healthy, trap = compose(["task=frozenlake"]), compose(SCENARIO)
    assert trap.actor_rollout_ref.actor.optim.lr >= 5 * healthy.actor_rollout_ref.actor.optim.lr
    assert trap.actor_rollout_ref.actor.optim.lr >= healthy.sft.lr  # a step of the SFT's size
    assert trap.data.train_batch_size == healthy.data.train_batch_size // 4
    assert trap.actor_rollout_ref.actor.ppo_mini_batch_size == trap.data.train_batch_size  # one update a step
    assert trap.algorithm.adv_estimator == healthy.algorithm.adv_estimator == "grpo"


def test_the_trap_emerges(train_run):
    _, run_dir = train_run([*SCENARIO, f"trainer.seed={SEED}", "trainer.stop_on_finding=echo_trap"])
    assert "echo_trap" in _roots(run_dir), _warnings(run_dir)


@pytest.mark.slow
def test_the_catalogue_fix_clears_it(train_run):
    _, run_dir = train_run([*SCENARIO, f"trainer.seed={SEED}"])
    (fix,) = {f["fix"] for f in _report(run_dir)["findings"] if f["id"] == "echo_trap"}
    _, fixed = train_run([*SCENARIO, f"trainer.seed={SEED}", *fix.split()])
    assert "echo_trap" not in _warnings(fixed)


@pytest.mark.slow
def test_healthy_shows_no_warning(train_run):
    _, run_dir = train_run(["task=frozenlake", f"trainer.seed={SEED}"])
    assert _warnings(run_dir) == []
