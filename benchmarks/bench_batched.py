"""Speed of the fast CartPole preset and of batched agents: seconds to solve with `+preset=fast` (5 seeds), time per
iteration for K = 1, 8, 64 agents in one Trainer, and a stability-map sweep through `hydra/launcher=batched` against
`hydra/launcher=joblib` (n_jobs = 2). One JSON line per figure. A solo run uses one torch thread (the default);
batches use the threads `hydra/launcher=batched` gives them (num_threads=auto: every core), and K = 1 is timed both
ways, the ratios taken to the faster of the two.

    python -m benchmarks.bench_batched [--only fast,k,sweep] [--repeats 1]
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from omegaconf import OmegaConf

from benchmarks.common import QUIET, emit, fit_timed, median, seconds_until
from playground.rundir.runs import read_metrics_jsonl

ROOT = Path(__file__).resolve().parents[1]
A = "actor_rollout_ref.actor"
FAST = ["task=cartpole", "+preset=fast"]
TARGET = 475.0


# ---- the fast preset ------------------------------------------------------------------------------------------
def solve_fast(seed: int) -> dict:
    """One `+preset=fast` run: where it stopped, its training seconds, and whether both solve criteria hold."""
    from playground.config import compose

    records, fit_s, fit_cpu_s, _ = fit_timed(compose([*QUIET, *FAST, f"trainer.seed={seed}"]))
    last = records[-1]
    train_mean, val = last.get("critic/score/mean", -math.inf), last.get("val/score", -math.inf)
    return {"seed": seed, "steps": int(last["training/global_step"]),
            "train_s": round(seconds_until(records, last["training/global_step"]), 3), "fit_s": round(fit_s, 3),
            "fit_cpu_s": round(fit_cpu_s, 3), "train_mean_10": train_mean, "val_score_100": round(val, 1),
            "solved": train_mean >= TARGET and val >= TARGET}


def _solved_median(runs: list[dict], key: str) -> float:
    """The median over all seeds, an unsolved seed counting as never solving."""
    return sorted(r[key] if r["solved"] else math.inf for r in runs)[len(runs) // 2]


def bench_fast(seeds: int, repeats: int) -> None:
    for repeat in range(repeats):
        runs = [solve_fast(s) for s in range(1, seeds + 1)]
        emit("fast_preset_seconds_to_solve", _solved_median(runs, "train_s"), "s", repeat=repeat, target="<= 1 s",
             fit_s=_solved_median(runs, "fit_s"), fit_cpu_s=_solved_median(runs, "fit_cpu_s"),
             solved=f"{sum(r['solved'] for r in runs)}/{seeds}",
             runs=runs, note="value: the training steps' wall time (timing_s/step) until the stop; fit_s adds "
             "records, logging and the validation at the stop; fit_cpu_s is fit's process CPU time (one thread: "
             "the wall time on an undisturbed core)")


# ---- K agents in one Trainer ----------------------------------------------------------------------------------
def agent_configs(k: int, steps: int) -> list:
    """K fast-preset agents: lr log-spaced 1e-3..2e-2, clip_ratio_high 0.1..0.3, seeds 1..K; no early stop."""
    from playground.config import compose

    base = compose([*QUIET, *FAST, "trainer.stop_on_score=null", "trainer.test_freq=-1",
                    f"trainer.total_training_steps={steps}"])
    cfgs = []
    for i in range(k):
        frac = i / max(1, k - 1)
        cfg = copy.deepcopy(base)
        OmegaConf.update(cfg, f"{A}.optim.lr", 1e-3 * 20**frac)
        OmegaConf.update(cfg, f"{A}.clip_ratio_high", 0.1 + 0.2 * frac)  # clip_ratio alone would be overridden
        OmegaConf.update(cfg, "trainer.seed", i + 1)
        cfgs.append(cfg)
    return cfgs


def time_per_iteration(k: int, steps: int, repeats: int = 3, threads: int = 1) -> dict:
    """Wall ms per training step of K agents, the whole loop (rollout, update, records, run-dir writes), on CPU.

    `repeats` fresh Trainers of `steps` steps each: the median and the best wall time, and the process CPU time
    (with one thread, the wall time an undisturbed core would take: the machine is shared); `ms_in_step` is
    the rollout + update part (`timing_s/step`, median). `threads`: torch threads on CPU.
    """
    from playground.train import build_trainer, prepare

    cfgs = agent_configs(k, steps)
    for cfg in cfgs:
        OmegaConf.update(cfg, "trainer.device", "cpu")  # not auto: these are the 2-core CPU figures
        OmegaConf.update(cfg, "trainer.num_threads", threads)
    walls, cpus, in_step = [], [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            trainer = build_trainer(cfgs, [Path(tmp) / str(i) for i in range(k)], prepare(cfgs[0]))
            start, cpu = time.perf_counter(), time.process_time()
            trainer.fit()
            walls.append((time.perf_counter() - start) / steps)
            cpus.append((time.process_time() - cpu) / steps)
            records = read_metrics_jsonl(Path(tmp) / "0" / "metrics.jsonl").records
        in_step += [r["timing_s/step"] for r in records[1:]]  # the first step pays one-off allocations
    env_steps = k * trainer.task.rows_per_step
    return {"K": k, "threads": threads,
            "ms_per_iteration": round(1000 * median(walls), 2), "ms_best": round(1000 * min(walls), 2),
            "cpu_ms_per_iteration": round(1000 * median(cpus), 2),
            "ms_in_step": round(1000 * median(in_step), 2), "agg_env_steps_per_s": round(env_steps / median(walls))}


def bench_k(ks: tuple[int, ...], steps: int, repeats: int) -> None:
    from playground.batched import batch_threads

    threads = batch_threads("auto", 2)  # what hydra/launcher=batched gives a batch on this machine
    solo = time_per_iteration(1, steps, repeats, threads=1)
    rows = [time_per_iteration(k, steps, repeats, threads=threads) for k in ks]
    k1 = [solo] + [row for row in rows if row["K"] == 1]
    base, best = min(r["ms_per_iteration"] for r in k1), min(r["ms_best"] for r in k1)
    emit("batched_K1_solo_ms_per_iteration", solo["ms_per_iteration"], "ms", **solo)
    for row in rows:
        target = {"target": "K=64 <= 10x K=1"} if row["K"] == 64 else {}
        emit(f"batched_K{row['K']}_ms_per_iteration", row["ms_per_iteration"], "ms",
             ratio_to_K1=round(row["ms_per_iteration"] / base, 2), ratio_best=round(row["ms_best"] / best, 2),
             **target, **row)


# ---- a sweep through the two launchers ------------------------------------------------------------------------
def run_sweep(launcher: list[str], args: list[str]) -> tuple[float, int]:
    """Wall seconds of `python -m playground.train -m <args> <launcher>` and the number of run dirs it made."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "playground.train", "-m", *args, *launcher, *QUIET,
               f"hydra.sweep.dir={tmp}"]
        start = time.perf_counter()
        out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if out.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {out.stderr[-1500:]}")
        jobs = sum(1 for _ in Path(tmp).glob("*/run.json"))
    return wall, jobs


def bench_sweep() -> None:
    what = "+sweep=stability_map"
    batched, jobs = run_sweep(["hydra/launcher=batched"], [what])
    joblib, _ = run_sweep(["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"], [what])
    emit("sweep_wall_batched_s", round(batched, 1), "s", sweep=what, jobs=jobs)
    emit("sweep_wall_joblib2_s", round(joblib, 1), "s", sweep=what, jobs=jobs,
         speedup_of_batched=round(joblib / batched, 2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="fast,k,sweep", help="comma-separated: fast, k, sweep")
    parser.add_argument("--repeats", type=int, default=1, help="the machine is shared: repeat to see the spread")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--k-steps", type=int, default=15, help="training steps per timed run, per K")
    args = parser.parse_args()
    torch.set_num_threads(1)  # each measurement sets its own threads through trainer.num_threads
    parts = args.only.split(",")
    if "fast" in parts:
        bench_fast(args.seeds, args.repeats)
    if "k" in parts:
        bench_k((1, 8, 64), args.k_steps, max(3, args.repeats))
    if "sweep" in parts:
        bench_sweep()


if __name__ == "__main__":
    main()
