"""Multi-turn generation throughput (`rollout.decode.generate` with its per-turn hook, `rollout.turns.EpisodeTurns`)
against single-turn generation (the same loop without it) at the same total length, both with the KV cache (issue
24's bar: >= 0.7x).

An untrained model on calc's tokenizer (22 tokens), EOS disabled, so every row runs to `--length` tokens on the
single-turn path. On the multi-turn path the turn-end tokens are `--turn-ends` of the digits (an untrained model samples
one every ~7 tokens: a turn as long as calc's tool call) and every call is answered with a reply of `--reply` tokens
(calc's `<result>` is 8) fed through the cache; a reply that would not fit ends the row, as in verl. Tokens/s counts the
tokens each path put in its rows (the multi-turn path's are the assistant's and the environment's: both went through
the model). The two paths alternate rep by rep; each one's median time counts. Prints one JSON line per batch size,
with the ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from playground.models.tiny_gpt import GPTConfig, TinyGPT
from playground.rollout.decode import generate
from playground.rollout.turns import EnvReply, EpisodeTurns
from playground.tasks.calc_data import CalcPrompts


class FixedReply:
    """Answers every turn with the same reply; never ends the episode."""

    def __init__(self, text: str):
        self.text = text

    def step(self, assistant_turn: str) -> EnvReply:
        return EnvReply(self.text, 0.0, False)

    def outcome(self, last_turn: str) -> dict[str, float]:
        return {"score": 0.0, "acc": 0.0}


def bench(batch: int, length: int, n_embd: int, turn_ends: int, reply: int, reps: int) -> dict:
    data = CalcPrompts(num_train=2048, num_val=16)
    tok = data.tokenizer
    torch.manual_seed(0)
    model = TinyGPT(GPTConfig(vocab_size=tok.vocab_size, block_size=data.max_prompt_tokens + length,
                              n_embd=n_embd)).eval()
    prompt_ids, prompt_mask = data.collate_prompts(data.sample(batch, torch.Generator().manual_seed(0)))
    turn_end_ids = [tok.stoi[d] for d in "0123456789"[:turn_ends]]
    reply_text = "<result>" + "7" * (reply - 2) + "</result>"

    def single() -> tuple[float, int]:
        t0 = time.perf_counter()
        out = generate(model, prompt_ids, prompt_mask, max_new_tokens=length, eos_id=-1, pad_id=tok.pad_id,
                       generator=torch.Generator().manual_seed(1))
        return time.perf_counter() - t0, int(out.attention_mask.sum())

    def multi() -> tuple[float, int]:
        episodes = [FixedReply(reply_text) for _ in range(batch)]
        t0 = time.perf_counter()
        turns = EpisodeTurns(episodes, turn_end_ids=turn_end_ids, encode=tok.encode, decode=tok.decode,
                             max_new_tokens=length, pad_id=tok.pad_id, device=prompt_ids.device)
        out = generate(model, prompt_ids, prompt_mask, max_new_tokens=length, eos_id=-1, pad_id=tok.pad_id,
                       generator=torch.Generator().manual_seed(1), turns=turns)
        multi.turns = statistics.mean(t.num_turns for t in turns.traces)
        return time.perf_counter() - t0, int(out.attention_mask.sum())

    # the two paths take turns, rep by rep: a shared machine's drift (another process, a clock change) then falls on
    # both alike instead of on whichever ran second (timed one after the other, five runs gave 0.66-1.04x)
    paths = {"single_turn": single, "multi_turn": multi}
    timed: dict[str, list[tuple[float, int]]] = {name: [] for name in paths}
    for run in paths.values():
        run()  # warm-up
    for _ in range(reps):
        for name, run in paths.items():
            timed[name].append(run())
    rates = {name: runs[0][1] / statistics.median(s for s, _ in runs) for name, runs in timed.items()}
    return {"bench": "multi_turn_generate", "batch": batch, "length": length, "n_embd": n_embd, "reply": reply,
            "num_turns_mean": round(multi.turns, 2), "single_turn_tokens_per_s": round(rates["single_turn"]),
            "multi_turn_tokens_per_s": round(rates["multi_turn"]),
            "ratio": round(rates["multi_turn"] / rates["single_turn"], 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, nargs="+", default=[16, 128])
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--n-embd", type=int, default=64)
    parser.add_argument("--turn-ends", type=int, default=3)
    parser.add_argument("--reply", type=int, default=8)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for batch in args.batch:
        print(json.dumps(bench(batch, args.length, args.n_embd, args.turn_ends, args.reply, args.reps)), flush=True)


if __name__ == "__main__":
    main()
