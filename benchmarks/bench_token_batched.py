"""Speed of batched token agents: K = 8 and K = 32 reverse configs trained as one batch against one config alone,
measured side by side in one process. One JSON line per figure.

Each run is what `hydra/launcher=batched` does for a batch (`batched.train_batch`: build the Trainer, train, write
every run dir and its findings); "one config alone" is the same for one job (`python -m playground.train` minus the
process start). The configs differ in learning rate and seed; 10 steps at the reverse task's own cadence (validation
before training and every 5 steps). A batch trains with the launcher's threads (`num_threads=auto`: every core) and,
for comparison, with one; the solo run keeps its config's single thread. The solo run is timed between the batches
(three times) and each ratio is taken to the median. On a shared machine the figures drift: `cpu_ratio` (process
CPU time, one thread) is what an undisturbed core would see. A few minutes on 2 free cores; with the cores busy, the
two-thread batches take far longer (their threads wait on each other: docs/tuning.md).

    python -m benchmarks.bench_token_batched [--ks 8,32] [--threads auto,1] [--steps 10]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.common import QUIET, emit, median

TARGETS = {8: 3.0, 32: 8.0}  # batched wall time ≤ this × one config alone, on 2 CPU cores


def token_configs(k: int, steps: int, device: str = "cpu", extra: tuple[str, ...] = ()) -> list:
    """K reverse configs: lr log-spaced 1e-4..1e-3 (3e-4 alone), seeds 1..K."""
    from playground.config import compose

    cfgs = []
    for i in range(k):
        lr = 3e-4 if k == 1 else 1e-4 * 10 ** (i / (k - 1))
        cfgs.append(compose([*QUIET, "task=reverse", f"trainer.total_training_steps={steps}",
                             f"trainer.device={device}", f"actor_rollout_ref.actor.optim.lr={lr:.3g}",
                             f"trainer.seed={i + 1}", *extra]))
    return cfgs


def time_batch(k: int, steps: int, threads: int | None) -> dict:
    """Wall and process-CPU seconds of `train_batch` for K configs; `threads` on CPU (None: the configs' own)."""
    from playground.batched import train_batch

    cfgs = token_configs(k, steps)
    with tempfile.TemporaryDirectory() as tmp:
        start, cpu = time.perf_counter(), time.process_time()
        statuses = train_batch(cfgs, [Path(tmp) / str(i) for i in range(k)], [[]] * k, num_threads=threads)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    if statuses != ["finished"] * k:
        raise RuntimeError(f"K={k}: {statuses}")
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "threads": torch.get_num_threads()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", default="8,32")
    parser.add_argument("--threads", default="auto,1", help="the batches' torch threads: auto (the launcher's), or N")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    from playground.batched import batch_threads

    ks = [int(k) for k in args.ks.split(",")]
    settings = [s if s == "auto" else int(s) for s in args.threads.split(",")]
    time_batch(1, 1, None)  # warm-up: imports, the SFT base from the cache, allocator
    solos, batches = [time_batch(1, args.steps, None)], []
    for k in ks:
        for setting in settings:
            batches.append((k, setting, time_batch(k, args.steps, batch_threads(setting, k))))
        solos.append(time_batch(1, args.steps, None))
    solo_wall, solo_cpu = median([s["wall_s"] for s in solos]), median([s["cpu_s"] for s in solos])
    emit("token_solo_run_s", solo_wall, "s", runs=[s["wall_s"] for s in solos], cpu_s=solo_cpu, steps=args.steps)
    for k, setting, row in batches:
        target = {"target": f"<= {TARGETS[k]:g}x"} if k in TARGETS and setting == "auto" else {}
        emit(f"token_batched_K{k}_over_solo", round(row["wall_s"] / solo_wall, 2), "x", K=k, num_threads=setting,
             cpu_ratio=round(row["cpu_s"] / solo_cpu, 2), **target, **row,
             note=f"one after another: {k}x; cpu_ratio: process CPU seconds (all threads) over the solo run's")


if __name__ == "__main__":
    main()
