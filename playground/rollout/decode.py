"""Sampling responses from a `TinyGPT` with its KV cache, as an inference engine does: the rollout's one decode loop.

`generate` decodes a batch token by token (agent k's rows from agent k's generator, so a batch of agents samples as
each would alone), and reports the log-probs of the tokens it sampled the way vLLM does (`logprobs_mode`). Given a
per-turn environment hook (`turns.EpisodeTurns`, verl's agent loop) it runs multi-turn episodes in the same pass: the
hook's replies are fed as forced tokens, out of the loss. `build_sequences` joins prompt and response into verl's
`input_ids` / `attention_mask` / `position_ids`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from playground.models.agents import ModelOrView
from playground.models.tiny_gpt import KVCache, TinyGPT, position_ids_from_mask

if TYPE_CHECKING:
    from playground.rollout.turns import EpisodeTurns


@dataclass
class GenerationOutput:
    responses: torch.Tensor  # (bs, max_new_tokens) long; pad_id after EOS
    response_mask: torch.Tensor  # (bs, max_new_tokens) long; 1 on the policy's tokens, up to and including EOS
    response_length: torch.Tensor  # (bs,) long; tokens in the response; == max_new_tokens means the limit was hit
    log_probs: torch.Tensor  # (bs, max_new_tokens) the log-probs the rollout reports (`logprobs_mode`); 0 where masked
    # (bs, max_new_tokens) long; 1 on every response token the model reads: the policy's and, in a multi-turn episode,
    # the environment's replies too. Single-turn it equals `response_mask`
    attention_mask: torch.Tensor


def _uniforms(generators: Sequence[torch.Generator | None], drawing: Sequence[bool], rows: int,
              device: torch.device) -> torch.Tensor:
    """One uniform per row `(B, 1)`, agent k's rows from agent k's generator. An agent whose rows have all ended
    draws nothing (zeros), so its generator advances exactly as in a run of its own."""
    per_agent = rows // len(generators)
    draws = [torch.rand((per_agent, 1), generator=g, device=device) if d else torch.zeros((per_agent, 1), device=device)
             for g, d in zip(generators, drawing, strict=True)]
    return draws[0] if len(draws) == 1 else torch.cat(draws)


def _pick_tokens(logits: torch.Tensor, temperature: float, top_p: float, uniforms: torch.Tensor | None,
                 top_k: int = -1, logprobs_mode: str = "processed_logprobs") -> tuple[torch.Tensor, torch.Tensor]:
    """Next tokens `(B,)` and their log-probs `(B,)` from last-position logits `(B, V)`; greedy without uniforms.

    The log-probs are what the engine reports (vLLM's `logprobs_mode`, verl's `rollout.logprobs_mode`):
    `processed_logprobs` of the distribution it sampled from (after temperature, top-k and top-p, renormalised),
    `raw_logprobs` of the model's logits before any of them."""
    logits = logits.float()  # vLLM's sampler works in fp32 whatever the model's dtype
    greedy = uniforms is None
    log_p = torch.log_softmax(logits if greedy else logits / temperature, dim=-1)  # (B, V)
    kept_mass = None  # the share of the tempered distribution the sampler kept (None: all of it)
    if uniforms is None:  # greedy
        tokens = log_p.argmax(-1)
    else:
        probs = log_p.exp()
        if top_k > 0:  # vLLM applies top-k before top-p; ties with the k-th token stay
            kth = probs.topk(min(top_k, probs.size(-1)), dim=-1).values[:, -1:]
            probs = probs.masked_fill(probs < kth, 0.0)
            kept_mass = probs.sum(-1)
        if top_p < 1.0:  # nucleus: keep the smallest top set whose mass (of what top-k kept) reaches top_p
            normed = probs if kept_mass is None else probs / kept_mass[:, None]
            sorted_p, order = normed.sort(dim=-1, descending=True, stable=True)
            drop_sorted = sorted_p.cumsum(-1) - sorted_p >= top_p  # mass before this token already enough
            probs = probs.masked_fill(torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted), 0.0)
            kept_mass = probs.sum(-1)
        # inverse-CDF sampling in vocabulary order, one uniform per row: the same draw picks the same
        # token when two code paths (cache / no cache) give logits that differ only by rounding
        cdf = probs.cumsum(-1)  # (B, V)
        u = uniforms * cdf[:, -1:]
        tokens = torch.searchsorted(cdf, u, right=True).squeeze(-1).clamp(max=probs.size(-1) - 1)
    if logprobs_mode == "raw_logprobs":
        return tokens, torch.log_softmax(logits, dim=-1).gather(-1, tokens[:, None]).squeeze(-1)
    token_log_p = log_p.gather(-1, tokens[:, None]).squeeze(-1)
    return tokens, token_log_p if kept_mass is None else token_log_p - kept_mass.log()


def _dtype_of(model: ModelOrView) -> torch.dtype:
    """The dtype a model (or an `agents.AgentView` of one, which holds its weights in `params`) computes in; fp32 for
    one without weights (a scripted test model)."""
    params = model.params.values() if isinstance(getattr(model, "params", None), dict) else model.parameters()
    first = next(iter(params), None)
    return torch.float32 if first is None else first.dtype


@torch.no_grad()
def generate(
    model: TinyGPT,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    *,
    max_new_tokens: int,
    eos_id: int,
    pad_id: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = -1,
    logprobs_mode: str = "processed_logprobs",
    do_sample: bool = True,
    generator: torch.Generator | Sequence[torch.Generator] | None = None,
    use_kv_cache: bool = True,
    turns: EpisodeTurns | None = None,
) -> GenerationOutput:
    """Samples responses for left-padded prompts, like verl's rollout (vLLM/SGLang) with `n=1`.

    A row stops at EOS; the EOS is part of the response and its mask (verl's response mask). The
    output always has width `max_new_tokens`, so `response_length == max_new_tokens` means "hit the
    limit" (verl's `response_length/clip_ratio`). Greedy when `do_sample=False` or `temperature == 0`.
    Put the model in eval mode first if it has dropout.

    Args:
        prompt_ids: `(bs, prompt_length)` left-padded.
        prompt_mask: `(bs, prompt_length)`, 1 on real prompt tokens.
        generator: the only source of randomness when sampling (None: torch's global RNG); for K agents
            (`stack_agents`, rows agent-major) one per agent, each drawing for its own rows only while they run.
        use_kv_cache: reuse past keys/values; without it every step recomputes the whole sequence.
            Both give the same tokens.
        top_k, logprobs_mode: see `_pick_tokens` (top_k <= 0: off, vLLM's -1 and HF's 0).
        turns: a multi-turn episode per row (`turns.EpisodeTurns`): when a row's assistant turn ends, its environment
            replies and the reply's tokens are fed one a step as forced tokens (in `attention_mask`, out of
            `response_mask`, log-prob 0), through the same KV cache; the hook ends rows too and keeps their traces.
            With no turn-end token ever sampled it samples what a single-turn call samples.
    """
    B = prompt_ids.size(0)
    device = prompt_ids.device
    if turns is not None and turns.rows != B:
        raise ValueError(f"one episode per row: {turns.rows} episodes for {B} rows")
    generators = list(generator) if isinstance(generator, Sequence) else [generator]
    sampling = do_sample and temperature != 0
    drawing = [True] * len(generators)  # which agents still have a row that runs
    responses = torch.full((B, max_new_tokens), pad_id, dtype=torch.long, device=device)
    response_mask = torch.zeros((B, max_new_tokens), dtype=torch.long, device=device)
    # what the model reads of the response: single-turn, the response mask itself (no second tensor to write a step)
    attention = response_mask if turns is None else torch.zeros((B, max_new_tokens), dtype=torch.long, device=device)
    log_probs = torch.zeros((B, max_new_tokens), device=device)
    done = torch.zeros(B, dtype=torch.bool, device=device)
    ids, mask = prompt_ids, prompt_mask.long()
    if use_kv_cache:
        cache = KVCache(model.config, B, prompt_ids.size(1) + max_new_tokens, device,
                        dtype=_dtype_of(model))
        logits, cache = model(ids, mask, position_ids_from_mask(mask), kv_cache=cache)
        num_valid = mask.sum(-1)  # (B,) real tokens so far: the position of the next real token
    for t in range(max_new_tokens):
        if not use_kv_cache:
            logits = model(ids, mask, position_ids_from_mask(mask))
        uniforms = _uniforms(generators, drawing, B, device) if sampling else None
        sampled, sampled_log_probs = _pick_tokens(logits[:, -1], temperature, top_p, uniforms, top_k, logprobs_mode)
        alive = ~done
        tokens = torch.where(alive, sampled, torch.full_like(sampled, pad_id))
        policy = alive  # the rows whose token the policy sampled (not the environment's)
        if turns is not None:
            replying = alive & turns.replying(t)
            policy = alive & ~replying
            tokens = torch.where(replying, turns.reply_tokens(t), tokens)
        responses[:, t] = tokens
        response_mask[:, t] = policy.long()
        log_probs[:, t] = torch.where(policy, sampled_log_probs, torch.zeros_like(sampled_log_probs))
        if turns is None:
            done = done | (tokens == eos_id)  # a finished row's pad is never EOS
        else:  # a turn that ended here gets its reply (or ends the episode); an environment's EOS ends nothing
            attention[:, t] = alive.long()
            done = done | (policy & (tokens == eos_id)) | turns.after_token(t, tokens, policy, responses)
        if t == max_new_tokens - 1:
            break
        agents_done = done.view(len(generators), -1).all(-1).tolist()  # one host sync per step
        if all(agents_done):
            break
        drawing = [not d for d in agents_done]
        new_mask = alive.long()[:, None]  # (B, 1)
        if use_kv_cache:
            # a finished row's pad token sits at its last real position, as cumsum(mask) - 1 puts it
            pos = torch.where(alive, num_valid, (num_valid - 1).clamp(min=0))[:, None]
            logits, cache = model(tokens[:, None], new_mask, pos, kv_cache=cache)
            num_valid = num_valid + alive.long()
        else:
            ids, mask = torch.cat([ids, tokens[:, None]], 1), torch.cat([mask, new_mask], 1)
    lengths = attention.sum(-1)
    if turns is not None:
        turns.finish(responses, lengths)
    return GenerationOutput(responses, response_mask, lengths, log_probs, attention)


def build_sequences(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, gen: GenerationOutput
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Prompt + response as verl's batch: `input_ids`, `attention_mask`, `position_ids`, each `(bs, P + R)`."""
    input_ids = torch.cat([prompt_ids, gen.responses], dim=1)
    attention_mask = torch.cat([prompt_mask.long(), gen.attention_mask], dim=1)
    return input_ids, attention_mask, position_ids_from_mask(attention_mask)
