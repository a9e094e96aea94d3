"""Multi-turn episodes in one pass of the KV cache, as verl's tool agent loop (`verl/experimental/agent_loop/
tool_agent_loop.py`) builds them: the policy writes an assistant turn, the environment answers, and so on.

Every row is decoded token by token, all rows (prompts and K stacked agents) in one batch, as `generation.generate`
does. A row's assistant turn ends at one of the task's turn-end tokens; its `Episode` then replies, and the reply's
tokens are fed through the model one a step as forced tokens (their keys and values enter the same cache, the context is
never re-encoded). The row's `responses` hold the assistant's and the environment's tokens in order; `response_mask` is
1 only on the assistant's (verl's multi-turn `response_mask`), `attention_mask` on both; the environment's tokens get
log-prob 0.

An episode ends as verl's does: at EOS (verl: an assistant turn without a tool call), when a reply says `done`, at
`max_assistant_turns` (checked when an assistant turn ends: that turn is kept, no reply follows), at `max_user_turns`
(the same check on the replies so far), or at the length cap: a reply that would leave no room (verl:
`len(response_mask) >= response_length` after merging it) is dropped and the episode ends. verl counts
`num_turns = user_turns + assistant_turns + 1` (the prompt is a turn): a single-turn answer is 2.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from playground.models.generation import GenerationOutput, _dtype_of, _pick_tokens, _uniforms
from playground.models.tiny_gpt import KVCache, TinyGPT, position_ids_from_mask
from playground.tasks.episodes import Episode


@dataclass
class EpisodeTrace:
    """One row's episode: its turns as response spans and what its environment made of them."""

    spans: list[tuple[str, int, int]] = field(default_factory=list)  # (role "assistant" | "env", start, end) in order
    assistant_turns: int = 0
    user_turns: int = 0  # the environment's replies that entered the context (verl's user_turns)
    # each reply's `EnvReply.reward`, with the position of the turn-end token it answers (where it is rewarded)
    turn_rewards: list[tuple[int, float]] = field(default_factory=list)
    outcome: dict[str, float] = field(default_factory=dict)  # `Episode.outcome`

    @property
    def num_turns(self) -> int:
        """verl's count: user turns + assistant turns + 1 (the prompt)."""
        return self.user_turns + self.assistant_turns + 1


@torch.no_grad()
def generate_episodes(
    model: TinyGPT,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    episodes: Sequence[Episode],
    *,
    turn_end_ids: Sequence[int],
    encode: Callable[[str], list[int]],
    decode: Callable[[list[int]], str],
    max_new_tokens: int,
    eos_id: int,
    pad_id: int,
    max_assistant_turns: int | None = None,
    max_user_turns: int | None = None,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = -1,
    logprobs_mode: str = "processed_logprobs",
    do_sample: bool = True,
    generator: torch.Generator | Sequence[torch.Generator] | None = None,
    use_kv_cache: bool = True,
) -> tuple[GenerationOutput, list[EpisodeTrace]]:
    """Runs one episode per row (`episodes[i]` is row i's, fresh) and returns the rows and their traces.

    Sampling, generators (one per agent, rows agent-major) and the KV cache are `generation.generate`'s; with no
    turn-end token ever sampled it samples the same tokens as `generate`. `encode`/`decode`: the task's tokenizer
    (text to ids without specials; ids to text, specials dropped, stopping at EOS). `max_assistant_turns`,
    `max_user_turns`: None or 0 for no limit (verl's null).
    """
    B = prompt_ids.size(0)
    device = prompt_ids.device
    if len(episodes) != B:
        raise ValueError(f"one episode per row: {len(episodes)} episodes for {B} rows")
    generators = list(generator) if isinstance(generator, Sequence) else [generator]
    sampling = do_sample and temperature != 0
    drawing = [True] * len(generators)
    responses = torch.full((B, max_new_tokens), pad_id, dtype=torch.long, device=device)
    response_mask = torch.zeros((B, max_new_tokens), dtype=torch.long, device=device)
    attention = torch.zeros((B, max_new_tokens), dtype=torch.long, device=device)
    log_probs = torch.zeros((B, max_new_tokens), device=device)
    done = torch.zeros(B, dtype=torch.bool, device=device)
    # the environment's tokens waiting to be fed: forced[i, t] is row i's token at step t while t < forced_until[i]
    forced = torch.full((B, max_new_tokens), pad_id, dtype=torch.long, device=device)
    forced_until = torch.zeros(B, dtype=torch.long, device=device)
    finish_after = torch.full((B,), max_new_tokens, dtype=torch.long, device=device)  # a done reply's last step
    turn_end = torch.tensor(list(turn_end_ids), dtype=torch.long, device=device)
    traces = [EpisodeTrace() for _ in range(B)]
    turn_start = [0] * B  # where each row's current turn began
    unseen = [""] * B  # each row's last assistant turn that no step saw
    ids, mask = prompt_ids, prompt_mask.long()
    if use_kv_cache:
        cache = KVCache(model.config, B, prompt_ids.size(1) + max_new_tokens, device, dtype=_dtype_of(model))
        logits, cache = model(ids, mask, position_ids_from_mask(mask), kv_cache=cache)
        num_valid = mask.sum(-1)
    for t in range(max_new_tokens):
        if not use_kv_cache:
            logits = model(ids, mask, position_ids_from_mask(mask))
        uniforms = _uniforms(generators, drawing, B, device) if sampling else None
        sampled, sampled_log_probs = _pick_tokens(logits[:, -1], temperature, top_p, uniforms, top_k, logprobs_mode)
        alive = ~done
        env = alive & (t < forced_until)
        policy = alive & ~env
        tokens = torch.where(env, forced[:, t], torch.where(alive, sampled, torch.full_like(sampled, pad_id)))
        responses[:, t] = tokens
        response_mask[:, t] = policy.long()
        attention[:, t] = alive.long()
        log_probs[:, t] = torch.where(policy, sampled_log_probs, torch.zeros_like(sampled_log_probs))
        eos = policy & (tokens == eos_id)
        ended = policy & torch.isin(tokens, turn_end)
        # one host sync a step: the rows whose turn ended here (their tokens so far), and which agents still run
        ended_rows = ended.nonzero().flatten().tolist()
        so_far = responses[ended_rows, :t + 1].tolist() if ended_rows else []
        fed_rows, fed_cols, fed_ids = [], [], []  # the replies' tokens, written into `forced` at once
        for i, row in zip(ended_rows, so_far, strict=True):
            trace, start = traces[i], turn_start[i]
            trace.spans.append(("assistant", start, t + 1))
            trace.assistant_turns += 1
            turn_start[i] = t + 1
            text = decode(row[start:])
            if (t + 1 >= max_new_tokens or (max_assistant_turns and trace.assistant_turns >= max_assistant_turns)
                    or (max_user_turns and trace.user_turns >= max_user_turns)):
                finish_after[i] = t  # verl: TERMINATED before any tool runs; the turn goes to outcome()
                unseen[i] = text
                continue
            reply = episodes[i].step(text)
            reply_ids = encode(reply.text)
            end = t + 1 + len(reply_ids)
            if end >= max_new_tokens:  # no room left after it: verl drops the reply and stops
                finish_after[i] = t
                continue
            trace.user_turns += 1
            trace.turn_rewards.append((t, float(reply.reward)))
            fed_rows += [i] * len(reply_ids)
            fed_cols += range(t + 1, end)
            fed_ids += reply_ids
            forced_until[i] = end
            if end > t + 1:
                trace.spans.append(("env", t + 1, end))
            turn_start[i] = end
            if reply.done:
                finish_after[i] = end - 1
        if fed_ids:
            forced[fed_rows, fed_cols] = torch.tensor(fed_ids, dtype=torch.long, device=device)
        done = done | eos | (t >= finish_after)
        if t == max_new_tokens - 1:
            break
        agents_done = done.view(len(generators), -1).all(-1).tolist()
        if all(agents_done):
            break
        drawing = [not d for d in agents_done]
        new_mask = alive.long()[:, None]
        if use_kv_cache:
            pos = torch.where(alive, num_valid, (num_valid - 1).clamp(min=0))[:, None]
            logits, cache = model(tokens[:, None], new_mask, pos, kv_cache=cache)
            num_valid = num_valid + alive.long()
        else:
            ids, mask = torch.cat([ids, tokens[:, None]], 1), torch.cat([mask, new_mask], 1)
    lengths = attention.sum(-1).tolist()
    for i, trace in enumerate(traces):  # the turn EOS or the length cap ended was never stepped: outcome() gets it
        if turn_start[i] < lengths[i]:
            trace.spans.append(("assistant", turn_start[i], lengths[i]))
            trace.assistant_turns += 1
            unseen[i] = decode(responses[i, turn_start[i]:lengths[i]].tolist())
        trace.outcome = dict(episodes[i].outcome(unseen[i]))
    return GenerationOutput(responses, response_mask, attention.sum(-1), log_probs, attention), traces
