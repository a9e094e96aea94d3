"""Rollout throughput of `playground.rollout.decode.generate`, with and without the KV cache.

Prints one JSON line per (d_model, batch, cache): generated tokens/s on reverse-5 prompts, one thread,
an untrained model and EOS disabled, so every row generates exactly `--new-tokens` tokens
(the same work on both paths; a trained model stopping at EOS would only shorten the loop).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from playground.models.tiny_gpt import GPTConfig, TinyGPT
from playground.rollout.decode import generate
from playground.tasks.prompt_sets import make_prompts


def bench(task, n_embd: int, batch: int, use_kv_cache: bool, new_tokens: int, reps: int, device: str) -> dict:
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=task.tokenizer.vocab_size, block_size=task.max_prompt_tokens + new_tokens,
                       n_embd=n_embd)
    model = TinyGPT(config).to(device).eval()
    prompt_ids, prompt_mask = (t.to(device) for t in task.collate_prompts(task.sample(batch, torch.Generator())))
    generator = torch.Generator(device=device).manual_seed(0)

    def run() -> float:
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        generate(model, prompt_ids, prompt_mask, max_new_tokens=new_tokens, eos_id=-1,  # -1: never stop early
                 pad_id=task.tokenizer.pad_id, generator=generator, use_kv_cache=use_kv_cache)
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    run()  # warm-up
    seconds = statistics.median(run() for _ in range(reps))
    return {"bench": "generate", "task": "reverse-5", "device": device, "n_embd": n_embd, "batch": batch,
            "kv_cache": use_kv_cache, "new_tokens": new_tokens, "ms_per_rollout": round(seconds * 1e3, 3),
            "tokens_per_s": round(batch * new_tokens / seconds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 64, 256])
    parser.add_argument("--n-embd", type=int, nargs="+", default=[64])
    parser.add_argument("--new-tokens", type=int, default=8)  # max_response_length of a healthy reverse-5 run
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    task = make_prompts("reverse")
    for n_embd in args.n_embd:
        for batch in args.batch:
            for use_kv_cache in (True, False):
                row = bench(task, n_embd, batch, use_kv_cache, args.new_tokens, args.reps, args.device)
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
