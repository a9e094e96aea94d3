"""What a token task's SFT base can do before RL: greedy and sampled accuracy, token entropy and pass@k on val.

The figures docs/training.md quotes for a base (issue 22: a base with room to collapse needs sampled pass@1 well below
pass@16), measured the way the trainer's validation measures a policy (`TokenTask.validate`: `n` samples per val
prompt at the rollout temperature, the unbiased pass@k), plus the two things validation does not report: greedy
accuracy (what the SFT's stop rule watches) and the mean entropy of the sampling distribution over response tokens.

    python -m playground.base_figures task=countdown
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence

import torch

from playground.models.tiny_gpt import TinyGPT, compute_log_prob, position_ids_from_mask
from playground.rollout.decode import generate
from playground.tasks.sft import greedy_accuracy
from playground.tasks.token_data import PromptSet, pass_at_k


@torch.no_grad()
def base_figures(model: TinyGPT, task: PromptSet, n: int = 16, ks: Sequence[int] = (1, 4, 16),
                 temperature: float = 1.0, seed: int = 0, batch_size: int = 1024) -> dict[str, float]:
    """Greedy accuracy, and over `n` samples per val prompt at `temperature`: accuracy (= pass@1), pass@k, the mean
    token entropy, the mean response length and the share of responses the reward calls well-formed (score > 0).

    Raises:
        ValueError: a k outside 1..n.
    """
    if any(not 1 <= k <= n for k in ks):
        raise ValueError(f"base_figures needs every k in 1..n={n}, got ks={list(ks)}")
    was_training = model.training
    model.eval()
    generator = torch.Generator().manual_seed(seed)
    examples = [ex for ex in task.val for _ in range(n)]
    acc, scores, entropy_sum, tokens = [], [], 0.0, 0
    for start in range(0, len(examples), batch_size):
        chunk = examples[start:start + batch_size]
        prompt_ids, prompt_mask = task.collate_prompts(chunk)
        out = generate(model, prompt_ids, prompt_mask, max_new_tokens=task.max_answer_tokens,
                       eos_id=task.tokenizer.eos_id, pad_id=task.tokenizer.pad_id, temperature=temperature,
                       do_sample=True, generator=generator)
        input_ids = torch.cat([prompt_ids, out.responses], dim=1)
        attention_mask = torch.cat([prompt_mask, out.response_mask], dim=1)
        _, entropy = compute_log_prob(model, input_ids, attention_mask, position_ids_from_mask(attention_mask),
                                      out.responses, temperature=temperature)
        entropy_sum += float((entropy * out.response_mask).sum())
        tokens += int(out.response_mask.sum())
        for text, ex in zip(task.decode_responses(out.responses), chunk, strict=True):
            result = task.score(text, ex)
            acc.append(result["acc"])
            scores.append(result["score"])
    correct = [int(sum(acc[i:i + n])) for i in range(0, len(acc), n)]
    figures = {"greedy_accuracy": greedy_accuracy(model, task, task.val), "sampled_accuracy": sum(acc) / len(acc)}
    figures.update({f"pass@{k}": sum(pass_at_k(n, c, k) for c in correct) / len(correct) for k in ks})
    figures.update({"token_entropy": entropy_sum / tokens, "response_length": tokens / len(acc),
                    "well_formed": sum(s > 0 for s in scores) / len(scores)})
    model.train(was_training)
    return figures


def main(overrides: list[str]) -> None:
    """Builds (or loads from the cache) the base of a composed config and prints its figures as one JSON line."""
    from playground.config import compose
    from playground.run_spec import resolve_base
    from playground.tasks.base_build import base_model_for

    torch.set_num_threads(1)
    cfg = compose(overrides)
    val = cfg.actor_rollout_ref.rollout.val_kwargs
    data, _, base = base_model_for(resolve_base(cfg))
    start = time.perf_counter()
    figures = base_figures(base.model, data, n=int(val.n), ks=[k for k in (1, 4, 16) if k <= int(val.n)],
                           temperature=float(val.temperature))
    print(json.dumps({"task": cfg.task.name, "sft_steps": base.steps, "sft_seconds": round(base.seconds, 1),
                      "cached": base.cached, **{k: round(v, 4) for k, v in figures.items()},
                      "measure_seconds": round(time.perf_counter() - start, 1)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
