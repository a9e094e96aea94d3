"""`make gpu-check`: aggregate env steps/s of K = 1, 64, 1024 batched CartPole agents on CUDA, with a check that a
rollout makes no per-step host round trips, then a short training of each task family (steps/s, peak memory).

Without a CUDA device it says so and exits 0. One JSON line per figure; a few minutes on an H200.

    python -m benchmarks.gpu_check
"""

from __future__ import annotations

import tempfile
import time
import warnings
from pathlib import Path

import torch

from benchmarks.common import emit, train
from playground.runs import read_metrics_jsonl

BUDGET_S = 200  # skip the family runs past this, to stay within ~5 minutes
K_VALUES = (1, 64, 1024)


def family_runs(device: str) -> None:
    """A few steps of CartPole (gym family) and of reverse (token family) on the device."""
    for task, steps in (("cartpole", 20), ("reverse", 5)):
        torch.cuda.reset_peak_memory_stats()
        records, wall, _ = train([f"task={task}", f"trainer.device={device}", f"trainer.total_training_steps={steps}",
                                  "trainer.test_freq=-1", "trainer.val_before_train=false"])
        emit(f"gpu_{task}_steps_per_s", round(len(records) / wall, 2), "steps/s", device=device, steps=len(records),
             peak_memory_gb=round(torch.cuda.max_memory_allocated() / 1024**3, 3),
             ms_in_step=round(1000 * sorted(r["timing_s/step"] for r in records)[len(records) // 2], 2))


def rollout_syncs(task) -> tuple[int, list[str]]:
    """Host syncs during one `generate()`: CUDA's sync debug mode warns at each synchronizing call."""
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            task.generate()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    messages = [str(w.message).splitlines()[0] for w in caught if "synchroniz" in str(w.message)]
    return len(messages), sorted(set(messages))[:3]


def batched_agents(k: int, device: str, steps: int) -> None:
    """K fast-preset CartPole agents in one Trainer on the device: rollout-only and whole-loop env steps/s."""
    from benchmarks.bench_batched import agent_configs
    from playground.train import prepare
    from playground.trainer import Trainer

    cfgs = agent_configs(k, steps)
    for cfg in cfgs:
        cfg.trainer.device = device
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        trainer = Trainer(cfgs, [Path(tmp) / str(i) for i in range(k)], prepare(cfgs[0]))
        build_s = time.perf_counter() - start
        task = trainer.task
        env_steps = k * task.rows_per_step
        task.generate()  # warm-up: kernels, allocator, the first reset pool
        syncs, examples = rollout_syncs(task)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(5):
            task.generate()
        torch.cuda.synchronize()
        rollout_s = (time.perf_counter() - start) / 5
        torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        trainer.fit()
        loop_s = (time.perf_counter() - start) / steps
        records = read_metrics_jsonl(Path(tmp) / "0" / "metrics.jsonl").records
    in_step = sorted(r["timing_s/step"] for r in records[1:])[(len(records) - 1) // 2]
    target = {"target": ">= 1e7 on an H200"} if k == 1024 else {}
    emit(f"gpu_cartpole_K{k}_rollout_env_steps_per_s", round(env_steps / rollout_s), "env steps/s", K=k,
         device=device, rollout_ms=round(1000 * rollout_s, 2), rollout_length=task.rollout_length,
         host_syncs_per_rollout=syncs, sync_examples=examples, **target)
    emit(f"gpu_cartpole_K{k}_train_env_steps_per_s", round(env_steps / loop_s), "env steps/s", K=k, device=device,
         ms_per_iteration=round(1000 * loop_s, 2), ms_in_step=round(1000 * in_step, 2), build_s=round(build_s, 1),
         peak_memory_gb=round(torch.cuda.max_memory_allocated() / 1024**3, 3),
         note="per iteration: the whole loop (rollout, update, per-agent records, run-dir writes); "
              "ms_in_step: rollout + update only")


def main() -> None:
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to check")
        return
    torch.set_num_threads(1)
    device = "cuda"
    start = time.perf_counter()
    emit("gpu_device", torch.cuda.get_device_name(), "name", torch=torch.__version__)
    for k in K_VALUES:  # the headline first; the token task may have to build its SFT base model (cached after)
        batched_agents(k, device, steps=10 if k >= 1024 else 20)
    if time.perf_counter() - start > BUDGET_S:
        emit("gpu_family_runs_skipped", None, "", reason=f"past the {BUDGET_S} s budget")
        return
    family_runs(device)


if __name__ == "__main__":
    main()
