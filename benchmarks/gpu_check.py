"""`make gpu-check`: aggregate env steps/s of K = 1, 64, 1024 batched CartPole agents on CUDA, with a check that a
rollout makes no per-step host round trips; aggregate tokens/s of K = 1, 8, 64 batched reverse agents and the ratio
to K = 1; then a short training of each task family (steps/s, peak memory); then verl's rollout_probs_diff of a
bf16 and an fp16 rollout against an fp32 trainer on the device's kernels (issue 23: on CUDA the mismatch is a kernel
fact, on a CPU a rounding one).

Without a CUDA device it says so and exits 0. One JSON line per figure; a few minutes on an H200 (the token batches
about 2). `--device cpu --token-ks 1,2 --token-steps 2 --only tokens` runs the token batches' code path on a CPU.

    python -m benchmarks.gpu_check [--only cartpole,tokens,families,precision]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

import torch

from benchmarks.common import emit, train
from playground.rundir.runs import read_metrics_jsonl

BUDGET_S = 330  # skip the family runs past this, to stay within ~7 minutes
K_VALUES = (1, 64, 1024)
TOKEN_K_VALUES = (1, 8, 64)


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
    from playground.train import build_trainer, prepare

    cfgs = agent_configs(k, steps)
    for cfg in cfgs:
        cfg.trainer.device = device
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        trainer = build_trainer(cfgs, [Path(tmp) / str(i) for i in range(k)], prepare(cfgs[0]))
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


def token_batches(device: str, ks: tuple[int, ...] = TOKEN_K_VALUES, steps: int = 6, extra: tuple[str, ...] = ()
                  ) -> None:
    """K reverse agents (differing lr and seed) in one Trainer on the device: aggregate tokens/s of a training step
    (prompt + response tokens of every agent over `timing_s/step`, the median past the first step) and the ratio to
    K = 1; generated tokens/s of the rollout beside it."""
    from benchmarks.bench_token_batched import token_configs
    from playground.train import build_trainer, prepare

    base = None
    for k in ks:
        cfgs = token_configs(k, steps, device, ("trainer.test_freq=-1", "trainer.val_before_train=false", *extra))
        with tempfile.TemporaryDirectory() as tmp:
            if device.startswith("cuda"):
                torch.cuda.reset_peak_memory_stats()
            start = time.perf_counter()
            trainer = build_trainer(cfgs, [Path(tmp) / str(i) for i in range(k)], prepare(cfgs[0]))
            build_s = time.perf_counter() - start
            trainer.fit()
            runs = [read_metrics_jsonl(Path(tmp) / str(i) / "metrics.jsonl").records for i in range(k)]
        steps_after_first = list(zip(*runs))[1:] or list(zip(*runs))
        rates = sorted(sum(r["perf/total_num_tokens"] for r in step) / step[0]["timing_s/step"]
                       for step in steps_after_first)
        rows = trainer.task.rows_per_step
        gen = sorted(sum(r["response_length/mean"] * rows for r in step) / step[0]["timing_s/gen"]
                     for step in steps_after_first)
        rate = rates[len(rates) // 2]
        base = rate if k == 1 or base is None else base
        memory = torch.cuda.max_memory_allocated() / 1024**3 if device.startswith("cuda") else None
        emit(f"gpu_reverse_K{k}_train_tokens_per_s", round(rate), "tokens/s", K=k, device=device,
             ratio_to_K1=round(rate / base, 2), gen_tokens_per_s=round(gen[len(gen) // 2]),
             ms_per_step=round(1000 * sorted(s[0]["timing_s/step"] for s in steps_after_first)[len(rates) // 2], 1),
             build_s=round(build_s, 1), peak_memory_gb=memory and round(memory, 3),
             note="all K agents' prompt + response tokens per second of a training step (rollout, ref, update)")


def rollout_precision(device: str, prompts: int = 256) -> dict[str, dict[str, float]]:
    """The reverse task's SFT base samples one response per prompt (temperature 1) as a bf16 and as an fp16 rollout
    (the model cast, its own KV cache and reported log-probs); an fp32 trainer scores the same tokens: verl's
    `training/rollout_probs_diff_*` per rollout dtype, emitted and returned."""
    from playground.algos.rollout_debug import rollout_probs_diff
    from playground.config import compose
    from playground.models.tiny_gpt import compute_log_prob
    from playground.rollout.decode import build_sequences, generate
    from playground.rollout.weights import RolloutSpec, RolloutWeights
    from playground.run_spec import resolve_base
    from playground.tasks.base_build import base_model_for

    cfg = compose(["task=reverse"])
    data, _, base = base_model_for(resolve_base(cfg))
    trainer = base.model.to(device).eval()
    examples = data.sample(prompts, torch.Generator().manual_seed(0))
    prompt_ids, prompt_mask = data.collate_prompts(examples, width=cfg.data.max_prompt_length,
                                                   truncation=cfg.data.truncation)
    prompt_ids, prompt_mask = prompt_ids.to(device), prompt_mask.to(device)
    out = {}
    for name in ("bfloat16", "float16"):
        spec = RolloutSpec(getattr(torch, name), 0, "full", (), True)
        rollout = RolloutWeights(trainer, spec)
        rollout.sync()
        gen = generate(rollout.model, prompt_ids, prompt_mask, max_new_tokens=cfg.data.max_response_length,
                       eos_id=data.tokenizer.eos_id, pad_id=data.tokenizer.pad_id,
                       generator=torch.Generator(device=device).manual_seed(1))
        ids, mask, pos = build_sequences(prompt_ids, prompt_mask, gen)
        with torch.no_grad():
            actor, _ = compute_log_prob(trainer, ids, mask, pos, gen.responses)
        probes = {k.split("/")[-1]: float(v) for k, v in
                  rollout_probs_diff(actor, gen.log_probs, gen.response_mask).items()}
        out[name] = probes
        emit(f"gpu_rollout_{name}_probs_diff_mean", round(probes["rollout_probs_diff_mean"], 6), "probability",
             device=device, max=round(probes["rollout_probs_diff_max"], 6),
             pearson=round(probes["rollout_actor_probs_pearson_corr"], 6),
             response_tokens=int(gen.response_mask.sum()),
             note="verl FAQ: normal < 0.005, > 0.01 an inference precision problem; fp32 trainer")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--only", default="cartpole,tokens,families,precision", help="comma-separated: cartpole, "
                        "tokens, families, precision")
    parser.add_argument("--token-ks", default=",".join(map(str, TOKEN_K_VALUES)))
    parser.add_argument("--token-steps", type=int, default=6)
    args = parser.parse_args()
    parts = args.only.split(",")
    device = args.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device: nothing to check")
        return
    torch.set_num_threads(1)
    start = time.perf_counter()
    cuda = device.startswith("cuda")  # on a CPU (proving the code path) only the token batches run
    if cuda:
        emit("gpu_device", torch.cuda.get_device_name(), "name", torch=torch.__version__)
    if "cartpole" in parts and cuda:
        for k in K_VALUES:  # the headline first
            batched_agents(k, device, steps=10 if k >= 1024 else 20)
    if "tokens" in parts:  # the first token run may have to build the SFT base model (cached after)
        token_batches(device, tuple(int(k) for k in args.token_ks.split(",")), args.token_steps)
    if "precision" in parts and cuda:  # seconds: before the family runs, which the budget may skip
        rollout_precision(device)
    if "families" in parts and cuda:
        if time.perf_counter() - start > BUDGET_S:
            emit("gpu_family_runs_skipped", None, "", reason=f"past the {BUDGET_S} s budget")
            return
        family_runs(device)


if __name__ == "__main__":
    main()
