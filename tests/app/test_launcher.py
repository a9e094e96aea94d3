"""Tests for `app/launcher.py`: what the explorer refuses to pass on, where it writes, the queue and its limit, and
stopping a real training process (Stop: SIGINT, the run records `interrupted`, stopped by you, its metrics kept; the
explorer's exit: SIGTERM)."""

from __future__ import annotations

import sys
import time

import pytest

from playground.rundir.runs import read_metrics_jsonl, read_run_info

import launcher
from fake_procs import FakeSpawn


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("PLAYGROUND_RUNS", str(tmp_path / "outputs"))
    monkeypatch.setenv("PLAYGROUND_WORKSHOP", str(tmp_path / "outputs" / "workshop"))
    return tmp_path / "outputs"


@pytest.mark.parametrize("override", [
    "hydra.run.dir=../x", "hydra.sweep.dir=/tmp/x", "hydra/launcher=joblib", "+hydra.job.chdir=true",
    "PLAYGROUND_CACHE=/tmp", "trainer.experiment_name=${oc.env:PLAYGROUND_RUNS}", "sft.lr=../../etc",
    "actor_rollout_ref.actor.optim.lr=${oc.env:HOME}", "+trainer.new_key=1", "~trainer.seed",
    "actor_rollout_ref.actor.optim.lr=1e-3,1e-2", "trainer.total_training_steps"])
def test_overrides_that_could_leave_the_runs_folder_are_refused(runs, override):
    with pytest.raises(launcher.Refused) as refused:
        launcher.check_override(override)
    assert "\n" not in str(refused.value) and override in str(refused.value)


def test_fixes_set_config_keys_but_not_groups_or_loggers(runs):
    assert launcher.fix_overrides("actor_rollout_ref.actor.optim.lr=0.005 algorithm.norm_adv=True") == [
        "actor_rollout_ref.actor.optim.lr=0.005", "algorithm.norm_adv=True"]
    assert launcher.check_override("actor_rollout_ref.model.hidden_sizes=[32,32]")  # a list is one value
    for refused in ("task=reverse", "scenario=healthy", "+debug=tiny", "trainer.logger=[wandb]",
                    "trainer.wandb_mode=online"):
        with pytest.raises(launcher.Refused):
            launcher.fix_overrides(refused)
    with pytest.raises(launcher.Refused, match="not a knob of this page"):
        launcher.check_override("critic.cliprange_value=1.0", allowed_keys=("task", "critic.optim.lr"))


def test_the_explorer_writes_only_under_its_folders(runs, tmp_path):
    run_dir = launcher.new_folder("lab", "cartpole/../../x")
    assert run_dir.is_dir() and run_dir.is_relative_to(runs / "lab") and ".." not in run_dir.name
    assert launcher.new_folder("lab", "cartpole/../../x") != run_dir  # the same second: a fresh folder
    with pytest.raises(launcher.Refused, match="outside the folders"):
        launcher.train_argv(["task=cartpole"], tmp_path / "elsewhere")
    with pytest.raises(launcher.Refused, match="outside the folders"):
        launcher.checked_folder(runs / ".." / "x")
    argv = launcher.train_argv(["task=cartpole"], run_dir)
    assert argv == [sys.executable, "-m", "playground.train", "task=cartpole",
                    f"hydra.run.dir={run_dir}"]


def test_only_the_playgrounds_entries_are_started(runs):
    own = launcher.Launcher(spawn=FakeSpawn())
    with pytest.raises(launcher.Refused, match="starts only"):
        own.submit("train", "x", [sys.executable, "-c", "print(1)"], runs, runs / "log")
    with pytest.raises(launcher.Refused, match="starts only"):
        own.submit("train", "x", ["/bin/sh", "-m", "playground.train"], runs, runs / "log")


def test_one_process_at_a_time_the_rest_wait(runs, monkeypatch):
    monkeypatch.setenv("PLAYGROUND_MAX_RUNS", "1")
    spawn = FakeSpawn(finish=False)
    own = launcher.Launcher(spawn=spawn)
    first, second, third = (own.submit("train", n, launcher.train_argv([], launcher.new_folder("lab", n)),
                                       runs, runs / f"{n}.log") for n in ("a", "b", "c"))
    assert [j.state for j in own.jobs()] == ["running", "queued", "queued"] and own.position(third) == 2
    assert spawn.started[0].kwargs["start_new_session"] and "shell" not in spawn.started[0].kwargs
    own.stop(second.id)  # waiting: cancelled, never started
    own.stop(first.id)  # running: SIGINT (Ctrl-C), then it ends
    spawn.started[0].finish(-15)
    assert [j.state for j in own.jobs()] == ["stopped", "cancelled", "running"]
    assert len(spawn.started) == 2
    monkeypatch.setenv("PLAYGROUND_MAX_RUNS", "3")
    assert launcher.Launcher().limit == 3
    monkeypatch.setenv("PLAYGROUND_MAX_RUNS", "lots")
    assert launcher.Launcher().limit == 1


def _wait_for_steps(run_dir, n=1, timeout_s=120.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (run_dir / "metrics.jsonl").is_file() and len(read_metrics_jsonl(run_dir / "metrics.jsonl").records) >= n:
            return
        time.sleep(0.2)
    raise AssertionError(f"{run_dir}: no metrics after {timeout_s} s")


def test_stop_and_shutdown_end_real_runs_as_interrupted(runs):
    """Stop ends a run the explorer started; the explorer exiting stops the rest (no orphan trains on)."""
    own = launcher.Launcher(limit=2)
    long_run = ["task=cartpole", "+debug=tiny", "trainer.total_training_steps=100000"]
    dirs = [launcher.new_folder("lab", name) for name in ("stopped", "at-exit")]
    jobs = [own.submit("train", d.name, launcher.train_argv(long_run, d), d, d / "console.log") for d in dirs]
    for run_dir in dirs:
        _wait_for_steps(run_dir, 2)
    assert read_run_info(dirs[0])["pid"] == jobs[0].pid
    own.stop(jobs[0].id)
    own.shutdown()
    for run_dir, job, why in zip(dirs, jobs, ("stopped by you (Ctrl-C, or Stop in the explorer)",
                                              "terminated by signal SIGTERM")):
        info = read_run_info(run_dir)
        assert info["status"] == "interrupted" and info["error"] == why, info
        assert len(read_metrics_jsonl(run_dir / "metrics.jsonl").records) >= 2  # kept
        assert job.state == "stopped"
