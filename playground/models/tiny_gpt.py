"""A tiny GPT for the token tasks, with a critic, KV-cache generation and a FLOPs count.

References: karpathy/nanoGPT `model.py` (the model) and verl (`dp_actor.py` / `dp_critic.py` for which
positions give log-probs and values, `flops_counter.py` for MFU). Simplifications: no flash/fused paths,
no weight-decay groups, float32 only, and the KV cache is a plain preallocated tensor per layer.

K agents train as one model (`models.agents.stack_agents`): every parameter gets a leading agent dim and the
batch holds agent 0's rows, then agent 1's, ... (`(K·rows, T)`). Only the layers that own weights (`AgentLinear`,
`AgentLayerNorm`, `AgentEmbedding`, torch's layers otherwise) know about agents; everything between them, attention
included, is the one forward below, over all K·rows rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F

from playground.models.agents import AgentEmbedding, AgentLayerNorm, AgentLinear
from playground.models.checkpointing import checkpointed


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """verl's convention for left padding: position = cumsum(mask) - 1, clipped at 0. `(B, T)` -> `(B, T)`."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


class KVCache:
    """Keys and values of every layer, preallocated to `max_len` positions, plus which keys are real.

    `TinyGPT.forward` writes the new positions at `[length, length + T)` and then advances `length`.
    """

    def __init__(self, config: GPTConfig, batch_size: int, max_len: int, device: torch.device | str = "cpu",
                 dtype: torch.dtype = torch.float32):
        hs = config.n_embd // config.n_head
        shape = (batch_size, config.n_head, max_len, hs)
        # the model's own dtype: a bf16 rollout keeps bf16 keys and values, as an inference engine's cache does
        self.k = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.n_layer)]
        self.v = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.n_layer)]
        self.key_mask = torch.zeros((batch_size, max_len), dtype=torch.bool, device=device)
        self.length = 0


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = AgentLinear(config.n_embd, 3 * config.n_embd, bias=config.bias)  # q, k, v for all heads
        self.c_proj = AgentLinear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head, self.n_embd, self.dropout = config.n_head, config.n_embd, config.dropout

    def forward(self, x: torch.Tensor, allowed: torch.Tensor, cache: KVCache | None, layer: int) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        if cache is not None:
            end = cache.length + T
            cache.k[layer][:, :, cache.length:end] = k
            cache.v[layer][:, :, cache.length:end] = v
            k, v = cache.k[layer][:, :, :end], cache.v[layer][:, :, :end]  # (B, nh, S, hs), S = past + T
        # allowed: (B, 1, T, S) bool, True where the query may look at the key
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=self.dropout if self.training else 0.0)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs side by side
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.c_fc = AgentLinear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = AgentLinear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    """Pre-LN transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln_1 = AgentLayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = AgentLayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor, allowed: torch.Tensor, cache: KVCache | None, layer: int) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), allowed, cache, layer)
        return x + self.mlp(self.ln_2(x))


@dataclass
class GPTConfig:
    vocab_size: int  # the task tokenizer's vocab_size (17 for token_data.Tokenizer)
    block_size: int  # longest prompt + response in tokens; learned positions exist only up to here
    n_layer: int = 2  # enough for reverse-5 and 3-digit addition (sum written reversed)
    n_head: int = 4
    n_embd: int = 64  # about 0.1M parameters; 128 works too at about 2x the step cost
    dropout: float = 0.0  # 0 keeps rollout and training log-probs identical, which PPO's ratio assumes
    bias: bool = True  # biases in Linears and LayerNorms, like GPT-2


class Trunk(nn.Module):
    """Embeddings + blocks + final LayerNorm: everything but the head. Shared by actor and critic.

    `gradient_checkpointing`: a training forward with gradients keeps only each block's input and recomputes the
    block in backward (`models.checkpointing`; `after_recompute` is called after each recomputation).
    """

    gradient_checkpointing: bool = False
    after_recompute = None

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.wte = AgentEmbedding(config.vocab_size, config.n_embd)
        self.wpe = AgentEmbedding(config.block_size, config.n_embd)
        self.drop = nn.Dropout(config.dropout)
        self.h = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        self.ln_f = AgentLayerNorm(config.n_embd, bias=config.bias)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        kv_cache: KVCache | None = None,
    ) -> torch.Tensor:
        """Hidden states `(B, T, C)`. With a cache, the inputs are the T new positions only."""
        B, T = input_ids.size()
        past = 0 if kv_cache is None else kv_cache.length
        # A position counts the real tokens before it, so it is at most its column: only a sequence wider than the
        # context can hold one past it, and only then is the exact check (a host sync on a GPU) needed.
        if past + T > self.config.block_size and int(position_ids.max()) >= self.config.block_size:
            raise ValueError(f"position {int(position_ids.max())} >= block_size {self.config.block_size}; "
                             "raise model block_size to cover max prompt + response tokens")
        key_mask = attention_mask.bool()  # (B, T)
        if kv_cache is not None:
            kv_cache.key_mask[:, past:past + T] = key_mask
            key_mask = kv_cache.key_mask[:, :past + T]  # (B, S)
        q_pos = torch.arange(past, past + T, device=input_ids.device)[:, None]  # (T, 1)
        k_pos = torch.arange(past + T, device=input_ids.device)[None, :]  # (1, S)
        # causal AND key is real; every query also sees itself, so a padded query never has an
        # all-masked row (softmax of all -inf is NaN, and 0 * NaN would leak into real positions)
        allowed = (k_pos <= q_pos) & (key_mask[:, None, :] | (k_pos == q_pos))  # (B, T, S)
        x = self.drop(self.wte(input_ids) + self.wpe(position_ids))  # (B, T, C)
        recompute = self.gradient_checkpointing and self.training and kv_cache is None and torch.is_grad_enabled()
        for layer, block in enumerate(self.h):
            if recompute:
                x = checkpointed(block, x, allowed[:, None], None, layer, after_recompute=self.after_recompute)
            else:
                x = block(x, allowed[:, None], kv_cache, layer)
        if kv_cache is not None:
            kv_cache.length += T
        return self.ln_f(x)


class TinyGPT(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.transformer = Trunk(config)
        self.lm_head = AgentLinear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # weight tying
        self.apply(_init_weights)
        for name, p in self.named_parameters():  # GPT-2's scaled init of the residual projections
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def trunk(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
              kv_cache: KVCache | None = None) -> torch.Tensor:
        """Hidden states `(B, T, C)` after the final LayerNorm."""
        return self.transformer(input_ids, attention_mask, position_ids, kv_cache)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
                kv_cache: KVCache | None = None) -> torch.Tensor | tuple[torch.Tensor, KVCache]:
        """Next-token logits at every position.

        Args:
            input_ids: `(B, T)` token ids, left-padded.
            attention_mask: `(B, T)`, 1 on real tokens; padded keys are never attended to.
            position_ids: `(B, T)`, `position_ids_from_mask(attention_mask)` (verl's convention).
            kv_cache: if given, the inputs are only the T new positions (their mask and positions
                too); their keys/values are appended and the cache advances by T.

        Returns:
            logits `(B, T, V)`, or `(logits, kv_cache)` when a cache was given.
        """
        logits = self.lm_head(self.trunk(input_ids, attention_mask, position_ids, kv_cache))
        return logits if kv_cache is None else (logits, kv_cache)


class TinyGPTCritic(nn.Module):
    """A trunk with a scalar value head, verl's critic (an LM whose head outputs one number)."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.transformer = Trunk(config)
        self.value_head = AgentLinear(config.n_embd, 1)
        self.apply(_init_weights)
        self._reset_head()

    def _reset_head(self) -> None:
        # a near-zero head: initial values ~0, so early advantages are about R, not R minus noise
        nn.init.normal_(self.value_head.weight, mean=0.0, std=0.01)
        nn.init.zeros_(self.value_head.bias)

    @classmethod
    def from_base(cls, actor: TinyGPT) -> TinyGPTCritic:
        """A critic with the actor's trunk weights (copied, not shared) and a fresh value head."""
        critic = cls(actor.config)
        critic.transformer.load_state_dict(actor.transformer.state_dict())
        return critic

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor
                ) -> torch.Tensor:
        """Values `(B, T)`, one per position: the value of the state ending at that token."""
        return self.value_head(self.transformer(input_ids, attention_mask, position_ids)).squeeze(-1)


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)


def compute_log_prob(
    model: TinyGPT,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    responses: torch.Tensor,
    temperature: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-prob and entropy of each response token, as verl's `dp_actor._forward_micro_batch`.

    Args:
        input_ids, attention_mask, position_ids: `(bs, prompt_length + response_length)`.
        responses: `(bs, response_length)`, the last R columns of `input_ids`.
        temperature: the rollout temperature; logits are divided by it before both outputs.

    Returns:
        log_probs `(bs, response_length)` and entropy `(bs, response_length)`; masked positions hold
        values too, so callers apply the response mask.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 for log-probs, got {temperature}")
    R = responses.size(1)
    P = input_ids.size(1) - R
    logits = model(input_ids, attention_mask, position_ids)[:, P - 1:P + R - 1] / temperature  # (bs, R, V)
    log_probs = torch.log_softmax(logits, dim=-1).gather(-1, responses.unsqueeze(-1)).squeeze(-1)
    # `masked.entropy_from_logits` in value, written out in this op order on purpose: the order sets how autograd
    # sums the gradient paths into `logits`, and the token scenarios are calibrated on these exact bits
    entropy = torch.logsumexp(logits, dim=-1) - (torch.softmax(logits, dim=-1) * logits).sum(-1)
    return log_probs, entropy


def compute_values(
    critic: TinyGPTCritic,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    response_length: int,
) -> torch.Tensor:
    """Values of the states before each response token, `(bs, response_length)`, as verl's dp_critic.

    Position -R-1 is the last prompt token (the state before response token 0); position -2 is the
    state before the last response token.
    """
    values = critic(input_ids, attention_mask, position_ids)  # (bs, P + R)
    return values[:, -response_length - 1:-1]


@dataclass
class GenerationOutput:
    responses: torch.Tensor  # (bs, max_new_tokens) long; pad_id after EOS
    response_mask: torch.Tensor  # (bs, max_new_tokens) long; 1 up to and including EOS
    response_length: torch.Tensor  # (bs,) long; == max_new_tokens means the limit was hit
    log_probs: torch.Tensor  # (bs, max_new_tokens) the log-probs the rollout reports (`logprobs_mode`); 0 where masked


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
    if greedy:
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


def _dtype_of(model) -> torch.dtype:
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
    """
    B = prompt_ids.size(0)
    device = prompt_ids.device
    generators = list(generator) if isinstance(generator, Sequence) else [generator]
    sampling = do_sample and temperature != 0
    drawing = [True] * len(generators)  # which agents still have a row that runs
    responses = torch.full((B, max_new_tokens), pad_id, dtype=torch.long, device=device)
    response_mask = torch.zeros((B, max_new_tokens), dtype=torch.long, device=device)
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
        tokens, token_log_probs = _pick_tokens(logits[:, -1], temperature, top_p, uniforms, top_k, logprobs_mode)
        alive = ~done
        tokens = torch.where(alive, tokens, torch.full_like(tokens, pad_id))
        responses[:, t] = tokens
        response_mask[:, t] = alive.long()
        log_probs[:, t] = torch.where(alive, token_log_probs, torch.zeros_like(token_log_probs))
        done = done | (tokens == eos_id)
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
    return GenerationOutput(responses, response_mask, response_mask.sum(-1), log_probs)


def build_sequences(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, gen: GenerationOutput
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Prompt + response as verl's batch: `input_ids`, `attention_mask`, `position_ids`, each `(bs, P + R)`."""
    input_ids = torch.cat([prompt_ids, gen.responses], dim=1)
    attention_mask = torch.cat([prompt_mask.long(), gen.response_mask], dim=1)
    return input_ids, attention_mask, position_ids_from_mask(attention_mask)


# ---- FLOPs and MFU, after verl/utils/flops_counter.py

def count_params(config: GPTConfig) -> int:
    """All parameters, the tied LM head counted once (equals `sum(p.numel() for p in model.parameters())`)."""
    C, b = config.n_embd, int(config.bias)
    ln = (1 + b) * C
    per_layer = 2 * ln + (3 * C * C + b * 3 * C) + (C * C + b * C) + (4 * C * C + b * 4 * C) + (4 * C * C + b * C)
    return config.vocab_size * C + config.block_size * C + config.n_layer * per_layer + ln


def count_matmul_params(config: GPTConfig) -> int:
    """N in 6·N·T: weights of qkv, attention proj, MLP in/out and the LM head (no embeddings, biases, LNs)."""
    C = config.n_embd
    return config.n_layer * (3 * C * C + C * C + 8 * C * C) + config.vocab_size * C


def count_flops(config: GPTConfig, seq_lens: Sequence[int]) -> float:
    """FLOPs of one forward + backward over sequences of these lengths, verl's convention.

    6·N·T for the matmuls plus 6·Σ s_j²·head_dim·n_head·n_layer for attention (6, not 12: causal half).
    """
    head_dim = config.n_embd // config.n_head
    tokens = sum(seq_lens)
    attention = 6 * sum(s * s for s in seq_lens) * head_dim * config.n_head * config.n_layer
    return float(6 * count_matmul_params(config) * tokens + attention)
