"""The sweep presets (`conf/sweep/`, Hydra's in-config sweeper params): the jobs they expand to, a real 2-job sweep
through the submitit launcher (the code path a SLURM cluster uses), and (slow) the `lr` sweep's three diagnoses."""

from __future__ import annotations

import math
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
from playground.rundir.runs import read_run_info

ROOT = Path(__file__).resolve().parents[2]
LR = "actor_rollout_ref.actor.optim.lr"
CLIP = "actor_rollout_ref.actor.clip_ratio_low"  # the key that acts in verl (clip_ratio_high follows it)
SEED = "trainer.seed"


def sweep_jobs(preset: str, task: str = "cartpole") -> tuple[object, list[list[str]]]:
    """The preset's composed config (with `hydra`) and the job overrides Hydra's basic sweeper makes of it."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = hydra_compose("config", overrides=[f"task={task}", f"+sweep={preset}"], return_hydra_config=True)
    params = [f"{key}={value}" for key, value in cfg.hydra.sweeper.params.items()]
    batches = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(params), None)
    return cfg, [job for batch in batches for job in batch]


def test_lr_preset_crosses_cartpoles_lr_from_one_thousandth_to_twenty_times_on_three_seeds():
    cfg, jobs = sweep_jobs("lr")
    assert cfg.hydra.mode == RunMode.MULTIRUN  # `-m` is optional
    lrs = sorted({float(o.split("=")[1]) for job in jobs for o in job if o.startswith(f"{LR}=")})
    assert lrs == [2.5e-6, 2.5e-5, 2.5e-4, 2.5e-3, 2.5e-2, 5e-2]
    assert cfg.actor_rollout_ref.actor.entropy_coeff == 0.05  # the high end overshoots instead of collapsing
    assert compose(["task=cartpole"]).actor_rollout_ref.actor.optim.lr in lrs


def test_format_score_preset_crosses_countdowns_format_score_past_a_right_answers_on_two_seeds():
    cfg, jobs = sweep_jobs("format_score", task="countdown")
    assert cfg.task.name == "countdown" and cfg.hydra.launcher._target_.endswith("BatchedLauncher")
    scores = sorted({float(o.split("=")[1]) for job in jobs for o in job if o.startswith("reward.format_score=")})
    assert scores[0] == compose(["task=countdown"]).reward.format_score and scores[-1] > 1.0 in scores
    assert len(jobs) == 2 * len(scores)
    for job in jobs:
        validate(compose(["task=countdown", *job]))


def test_length_bias_preset_crosses_the_losss_aggregation_with_the_groups_std_on_countdown():
    cfg, jobs = sweep_jobs("length_bias", task="countdown")
    assert cfg.task.name == "countdown" and cfg.hydra.mode == RunMode.MULTIRUN
    assert cfg.task.max_rechecks > 0  # a base whose wrong answers have a length to grow by
    cells = {(o["actor_rollout_ref.actor.loss_agg_mode"], o["algorithm.norm_adv_by_std_in_grpo"].lower())
             for o in (dict(x.split("=", 1) for x in job) for job in jobs)}
    # GRPO as its paper wrote it, verl's default and Dr. GRPO (+preset=dr_grpo) are all among them
    assert {("seq-mean-token-mean", "true"), ("token-mean", "true"), ("seq-mean-token-sum-norm", "false")} <= cells
    assert len(jobs) == len(cells) == 6
    for job in jobs:
        validate(compose(["task=countdown", *job]))


@pytest.mark.parametrize(("preset", "cells", "keys"), [
    ("lr", 6, {LR}), ("entropy", 5, {"actor_rollout_ref.actor.entropy_coeff"}), ("clip", 5, {CLIP}),
    ("stability_map", 16, {LR, CLIP})])
def test_every_preset_runs_three_seeds_a_cell_batched_on_verls_keys(preset, cells, keys):
    cfg, jobs = sweep_jobs(preset)
    assert len(jobs) == 3 * cells and len({tuple(job) for job in jobs}) == len(jobs)
    assert cfg.hydra.launcher._target_.endswith("BatchedLauncher")
    for job in jobs:
        assert {o.split("=")[0] for o in job} == keys | {SEED}
        cfg = compose(["task=cartpole", f"+sweep={preset}", *job])
        check_scenario_applies(cfg)
        validate(cfg)
        actor = cfg.actor_rollout_ref.actor
        assert actor.clip_ratio_high == actor.clip_ratio_low  # the clip sweeps move both ends


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
    """`python -m playground.train task=cartpole +sweep=lr` as a user runs it (18 CartPole runs as one batch)."""
    from playground.diagnose.sources import diagnose_path

    sweep_dir = tmp_path / "sweep"
    done = run_cli(["task=cartpole", "+sweep=lr", "trainer.progress_bar=false", "trainer.logger=[]",
                    f"hydra.sweep.dir={sweep_dir}"], timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    roots: dict[float, list[list[str]]] = {}
    for run, report in diagnose_path(sweep_dir):
        lr = next(float(o.split("=")[1]) for o in read_run_info(run)["overrides"] if o.startswith(f"{LR}="))
        roots.setdefault(lr, []).append(report.roots())
    assert sorted(roots) == [2.5e-6, 2.5e-5, 2.5e-4, 2.5e-3, 2.5e-2, 5e-2] and all(len(v) == 3 for v in roots.values())
    assert sum("lr_too_low" in r for r in roots[2.5e-6]) >= 2, roots[2.5e-6]
    # lr/100 still creeps up (to about 76 of 475): too slowly to be healthy (rule lr_too_low_slow_progress)
    assert sum("lr_too_low" in r for r in roots[2.5e-5]) >= 2, roots[2.5e-5]
    assert sum("lr_too_high" in r for r in roots[5e-2]) >= 2, roots[5e-2]
    assert sum(r[:1] == ["healthy"] for r in roots[2.5e-3]) >= 2, roots[2.5e-3]


def test_a_four_trial_optuna_search_batches_its_trials_and_returns_the_objective(tmp_path):
    """`hydra/sweeper=optuna` (the `lr_search` preset): each run returns its objective to the sweeper, and the trials
    asked together share their shapes, so they train as one batch of agents."""
    sweep_dir = tmp_path / "search"
    done = run_cli(["task=cartpole", "+sweep=lr_search", "+debug=tiny", "hydra.sweeper.n_trials=4",
                    "hydra.sweeper.n_jobs=2", f"hydra.sweep.dir={sweep_dir}"], timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    log = done.stdout + done.stderr  # Hydra's own log goes to stdout, optuna's to stderr
    assert log.count("batch of 2 agents") == 2  # two asks of two trials, each one batch
    import yaml

    results = yaml.safe_load((sweep_dir / "optimization_results.yaml").read_text())
    assert results["name"] == "optuna" and LR in results["best_params"]
    lrs = [float(next(o for o in read_run_info(sweep_dir / str(j))["overrides"] if o.startswith(LR)).split("=")[1])
           for j in range(4)]
    assert all(1e-4 <= lr <= 0.3 for lr in lrs) and len(set(lrs)) == 4
    # largest_healthy: log10(lr), minus 10 for a run that does not reach its target healthily (none does in 4 steps),
    # so the best trial is the largest lr
    assert results["best_params"][LR] == pytest.approx(max(lrs))
    assert results["best_value"] == pytest.approx(math.log10(max(lrs)) - 10)
