"""The sweep presets (`conf/sweep/`, Hydra's in-config sweeper params): the jobs they expand to, a real 2-job sweep
through the submitit launcher (the code path a SLURM cluster uses), and (slow) the `lr` sweep's three diagnoses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.types import RunMode

from playground.config import CONF_DIR, check_scenario_applies, compose, validate
from playground.runs import read_run_info

ROOT = Path(__file__).resolve().parents[2]
LR = "actor_rollout_ref.actor.optim.lr"
CLIP = "actor_rollout_ref.actor.clip_ratio"


def sweep_jobs(preset: str, task: str = "cartpole") -> tuple[object, list[list[str]]]:
    """The preset's composed config (with `hydra`) and the job overrides Hydra's basic sweeper makes of it."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = hydra_compose("config", overrides=[f"task={task}", f"+sweep={preset}"], return_hydra_config=True)
    params = [f"{key}={value}" for key, value in cfg.hydra.sweeper.params.items()]
    batches = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(params), None)
    return cfg, [job for batch in batches for job in batch]


def test_lr_preset_crosses_cartpoles_lr_from_one_hundredth_to_twenty_times():
    cfg, jobs = sweep_jobs("lr")
    assert cfg.hydra.mode == RunMode.MULTIRUN  # `-m` is optional
    assert [float(job[0].split("=")[1]) for job in jobs] == [2.5e-5, 2.5e-4, 2.5e-3, 2.5e-2, 5e-2]
    assert all(job[0].startswith(f"{LR}=") and len(job) == 1 for job in jobs)
    assert cfg.actor_rollout_ref.actor.entropy_coeff == 0.05  # the high end overshoots instead of collapsing
    default_lr = compose(["task=cartpole"]).actor_rollout_ref.actor.optim.lr
    assert default_lr in [float(job[0].split("=")[1]) for job in jobs]


@pytest.mark.parametrize(("preset", "count", "keys"), [
    ("lr", 5, {LR}), ("entropy", 5, {"actor_rollout_ref.actor.entropy_coeff"}), ("clip", 5, {CLIP}),
    ("stability_map", 16, {LR, CLIP})])
def test_every_preset_expands_into_valid_jobs(preset, count, keys):
    _, jobs = sweep_jobs(preset)
    assert len(jobs) == count and len({tuple(job) for job in jobs}) == count
    for job in jobs:
        assert {o.split("=")[0] for o in job} == keys
        cfg = compose(["task=cartpole", f"+sweep={preset}", *job])
        check_scenario_applies(cfg)
        validate(cfg)


def run_cli(args: list[str], timeout: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "playground.train", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_two_job_sweep_runs_through_submitit_local(tmp_path):
    """The launcher a SLURM cluster uses (`hydra/launcher=submitit_slurm`), in its local form: real subprocesses."""
    sweep_dir = tmp_path / "sweep"
    done = run_cli(["-m", "task=cartpole", "trainer.seed=1,2", "trainer.total_training_steps=2",
                    "trainer.progress_bar=false", "trainer.logger=[]", "hydra/launcher=submitit_local",
                    "hydra.launcher.timeout_min=5", f"hydra.sweep.dir={sweep_dir}"], timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    infos = [read_run_info(sweep_dir / str(job)) for job in (0, 1)]
    assert [i["status"] for i in infos] == ["finished", "finished"]
    assert sorted(i["seed"] for i in infos) == [1, 2] and all(i["last_step"] == 2 for i in infos)
    assert (sweep_dir / ".submitit").is_dir()  # the jobs went through submitit


@pytest.mark.slow
def test_lr_sweep_yields_lr_too_low_healthy_and_lr_too_high(tmp_path):
    """`python -m playground.train task=cartpole +sweep=lr` as a user runs it (five full CartPole runs, ~1 min)."""
    from playground.diagnose.engine import diagnose_path

    sweep_dir = tmp_path / "sweep"
    done = run_cli(["task=cartpole", "+sweep=lr", "trainer.progress_bar=false", "trainer.logger=[]",
                    f"hydra.sweep.dir={sweep_dir}"], timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    by_lr = {}
    for run, diagnosis in diagnose_path(sweep_dir):
        lr = next(float(o.split("=")[1]) for o in read_run_info(run)["overrides"] if o.startswith(f"{LR}="))
        by_lr[lr] = diagnosis
    assert sorted(by_lr) == [2.5e-5, 2.5e-4, 2.5e-3, 2.5e-2, 5e-2]
    assert "lr_too_low" in by_lr[2.5e-5].ids()
    assert "lr_too_high" in by_lr[5e-2].ids()
    healthy = [lr for lr, d in by_lr.items() if "healthy" in d.ids() and d.worst_severity() == "info"]
    assert set(healthy) & {2.5e-4, 2.5e-3}, {lr: d.ids() for lr, d in by_lr.items()}
