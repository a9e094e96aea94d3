"""Token tasks with the healthy defaults: wall time to 0.9 validation accuracy on `reverse` (SFT build included, then
cached), rollout tokens/s with and without the KV cache at the run's batch size, and the share of step time in `gen`.

    python -m benchmarks.bench_tokens
"""

from __future__ import annotations

import os
import tempfile
import time

import torch

from benchmarks.common import emit, first_reaching, median, train
from playground.metrics import STEP


def rollout_tokens_per_s(trainer, use_kv_cache: bool, repeats: int = 5) -> float:
    from playground.rollout.decode import generate

    task = trainer.task
    examples = task.data.sample(task.rows_per_step, torch.Generator().manual_seed(0))
    prompts, mask = task.data.collate_prompts(examples, width=task.spec.max_prompt_length, truncation="left")
    tokens, start = 0, time.perf_counter()
    for _ in range(repeats):
        out = generate(task.model.eval(), prompts, mask, max_new_tokens=task.spec.max_response_length,
                       eos_id=task.tokenizer.eos_id, pad_id=task.tokenizer.pad_id, generator=torch.Generator(),
                       use_kv_cache=use_kv_cache)
        tokens += int(out.response_mask.sum())
    return tokens / (time.perf_counter() - start)


def main() -> None:
    times, gen_shares, trainer = [], [], None
    for seed in (1, 2, 3):
        with tempfile.TemporaryDirectory() as cache:
            os.environ["PLAYGROUND_CACHE"] = cache  # an empty cache: the SFT base is built inside the timing
            start = time.perf_counter()
            records, _, trainer = train(["task=reverse", f"trainer.seed={seed}", "trainer.total_training_steps=60"])
            total = time.perf_counter() - start
        hit = first_reaching(records, "val/accuracy", 0.9)
        sft = trainer.task.base.seconds
        steps = [r for r in records if r[STEP] > 0 and (hit is None or r[STEP] <= hit[STEP])]
        rl = sum(r.get("timing_s/step", 0) + r.get("timing_s/testing", 0) for r in steps)
        times.append(round(sft + rl, 2) if hit else None)
        gen_shares.append(median([r["timing_s/gen"] / r["timing_s/step"] for r in records if "timing_s/gen" in r]))
        emit("reverse_run", hit and hit[STEP], "steps to 0.9", seed=seed, sft_s=round(sft, 2), rl_s=round(rl, 2),
             process_s=round(total, 2), base_accuracy=records[0].get("val/accuracy"))
    emit("reverse_seconds_to_0.9_incl_sft", median(times), "s", runs=times, target="<= 30 s")
    emit("reverse_gen_share_of_step", round(median(gen_shares), 3), "fraction")
    for cache in (True, False):
        emit(f"rollout_tokens_per_s_kv_cache_{'on' if cache else 'off'}", round(rollout_tokens_per_s(trainer, cache)),
             "tokens/s", batch=trainer.task.rows_per_step)


if __name__ == "__main__":
    main()
