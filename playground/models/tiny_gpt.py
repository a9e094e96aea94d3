"""A tiny GPT for the token tasks, with a critic, KV-cache generation and a FLOPs count.

References: karpathy/nanoGPT `model.py` (the model) and verl (`dp_actor.py` / `dp_critic.py` for which
positions give log-probs and values, `flops_counter.py` for MFU). Simplifications: no flash/fused paths,
no weight-decay groups, and the KV cache is a plain preallocated tensor per layer. Sampling with the cache is in
`playground/rollout/decode.py`.

K agents train as one model (`models.agents.stack_agents`): every parameter gets a leading agent dim and the
batch holds agent 0's rows, then agent 1's, ... (`(K·rows, T)`). Only the layers that own weights (`AgentLinear`,
`AgentLayerNorm`, `AgentEmbedding`, torch's layers otherwise) know about agents; everything between them, attention
included, is the one forward below, over all K·rows rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
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
    vocab_size: int  # the task tokenizer's vocab_size (reverse's and addition's: 17)
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
    after_recompute: Callable[[], None] | None = None

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
