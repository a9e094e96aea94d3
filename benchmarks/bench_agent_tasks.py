"""The multi-turn tasks with their healthy defaults: training seconds until validation first reaches the task's success
target (issue 24's bar: <= 5 minutes on one CPU core), on development seeds 1 and 2.

A run stops at its target (`trainer.stop_on_score`). Seconds are `timing_s/step` summed up to that validation
(validation itself excluded, as `seconds_until` counts); the SFT base is reported beside them (built on the first
call, then cached: `sft_s` is its build time either way). Validation runs every `trainer.test_freq` steps, so a run
is seen at its target up to that many steps after it got there.

    python -m benchmarks.bench_agent_tasks
"""

from __future__ import annotations

from benchmarks.common import emit, first_reaching, median, seconds_until, train
from playground.config import compose
from playground.metrics import STEP

TASKS = ("calc", "frozenlake")
SEEDS = (1, 2)
BAR_S = 300.0


def main() -> None:
    for task in TASKS:
        target = float(compose([f"task={task}"]).task.score_target)
        times = []
        for seed in SEEDS:
            records, _, trainer = train([f"task={task}", f"trainer.seed={seed}", f"trainer.stop_on_score={target}"])
            hit = first_reaching(records, "val/accuracy", target)
            seconds = round(seconds_until(records, hit[STEP]), 1) if hit else None
            times.append(seconds)
            base = trainer.task.base
            emit(f"{task}_run", hit and int(hit[STEP]), "steps to target", seed=seed, target=target, rl_s=seconds,
                 sft_s=round(base.seconds, 1), sft_cached=base.cached, base_accuracy=records[0].get("val/accuracy"),
                 reached=hit and hit["val/accuracy"])
        emit(f"{task}_seconds_to_target", median(times), "s", runs=times, target=f"<= {BAR_S:.0f} s")


if __name__ == "__main__":
    main()
