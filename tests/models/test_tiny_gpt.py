"""Tests for the tiny GPT: masking, KV-cache generation, log-prob and value positions, FLOPs and peaks."""

from __future__ import annotations

import pytest
import torch

from playground.models.tiny_gpt import (
    GPTConfig,
    KVCache,
    TinyGPT,
    TinyGPTCritic,
    compute_log_prob,
    compute_values,
    count_flops,
    count_matmul_params,
    count_params,
    position_ids_from_mask,
)
from playground.rollout.decode import build_sequences, generate

V, PAD, BOS, EOS = 17, 0, 1, 2


@pytest.fixture(scope="module")
def model() -> TinyGPT:
    torch.manual_seed(0)
    return TinyGPT(GPTConfig(vocab_size=V, block_size=24)).eval()


def mixed_prompts(batch: int = 48, width: int = 7, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded prompts of lengths 2..width: BOS then random digits."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 13, (batch, width), generator=g)
    lengths = torch.randint(2, width + 1, (batch,), generator=g)
    mask = (torch.arange(width)[None, :] >= width - lengths[:, None]).long()
    ids[torch.arange(batch), width - lengths] = BOS
    return ids.masked_fill(mask == 0, PAD), mask


# ---- forward and masks

def test_position_ids_from_mask():
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 0, 0]])
    assert position_ids_from_mask(mask).tolist() == [[0, 0, 0, 1, 2], [0, 1, 2, 2, 2]]


def test_left_padding_does_not_change_real_positions(model):
    ids = torch.tensor([[BOS, 4, 5, 6]])
    short = model(ids, torch.ones_like(ids), position_ids_from_mask(torch.ones_like(ids)))
    padded_ids = torch.tensor([[PAD, PAD, BOS, 4, 5, 6]])
    mask = torch.tensor([[0, 0, 1, 1, 1, 1]])
    padded = model(padded_ids, mask, position_ids_from_mask(mask))
    assert torch.isfinite(padded).all()
    torch.testing.assert_close(padded[:, 2:], short, atol=1e-5, rtol=0)


def test_kv_cache_forward_in_chunks_equals_full_forward(model):
    ids, mask = mixed_prompts(batch=4, width=7)
    pos = position_ids_from_mask(mask)
    full = model(ids, mask, pos)
    cache = KVCache(model.config, 4, 7)
    first, cache = model(ids[:, :4], mask[:, :4], pos[:, :4], kv_cache=cache)
    second, cache = model(ids[:, 4:], mask[:, 4:], pos[:, 4:], kv_cache=cache)
    assert cache.length == 7
    real = mask.bool()
    torch.testing.assert_close(torch.cat([first, second], 1)[real], full[real], atol=1e-5, rtol=0)


def test_positions_past_block_size_raise(model):
    ids = torch.ones((1, 25), dtype=torch.long)
    with pytest.raises(ValueError, match="block_size"):
        model(ids, torch.ones_like(ids), position_ids_from_mask(torch.ones_like(ids)))


def test_weight_tying(model):
    assert model.lm_head.weight is model.transformer.wte.weight


# ---- generation

@pytest.mark.parametrize("kwargs", [
    dict(do_sample=True, temperature=1.0),
    dict(do_sample=True, temperature=0.7, top_p=0.9),
    dict(do_sample=False),
    dict(do_sample=True, temperature=0.0),  # temperature 0 is greedy
])
def test_kv_cache_generation_equals_recompute(model, kwargs):
    prompt_ids, prompt_mask = mixed_prompts()
    outs = [generate(model, prompt_ids, prompt_mask, max_new_tokens=8, eos_id=EOS, pad_id=PAD,
                     generator=torch.Generator().manual_seed(1), use_kv_cache=kv, **kwargs)
            for kv in (True, False)]
    cached, plain = outs
    assert torch.equal(cached.responses, plain.responses)
    assert torch.equal(cached.response_mask, plain.response_mask)
    assert torch.equal(cached.response_length, plain.response_length)
    torch.testing.assert_close(cached.log_probs, plain.log_probs, atol=1e-5, rtol=0)
    if kwargs.get("do_sample") and kwargs.get("temperature"):  # an untrained model's rows end at different steps
        assert 1 < len(set(cached.response_length.tolist())) and (cached.response_length == 8).any()


def test_sampling_is_driven_by_the_generator(model):
    prompt_ids, prompt_mask = mixed_prompts()
    def run(seed):
        return generate(model, prompt_ids, prompt_mask, max_new_tokens=6, eos_id=EOS, pad_id=PAD,
                        generator=torch.Generator().manual_seed(seed)).responses
    assert torch.equal(run(3), run(3))
    assert not torch.equal(run(3), run(4))


def test_tiny_top_p_is_greedy(model):
    prompt_ids, prompt_mask = mixed_prompts()
    nucleus = generate(model, prompt_ids, prompt_mask, max_new_tokens=6, eos_id=EOS, pad_id=PAD, top_p=1e-6,
                       generator=torch.Generator().manual_seed(0))
    greedy = generate(model, prompt_ids, prompt_mask, max_new_tokens=6, eos_id=EOS, pad_id=PAD, do_sample=False)
    assert torch.equal(nucleus.responses, greedy.responses)


class ScriptedModel(torch.nn.Module):
    """Emits `script[row][step]` with certainty; counts forward calls."""

    def __init__(self, script: list[list[int]], prompt_width: int):
        super().__init__()
        self.config = GPTConfig(vocab_size=V, block_size=32, n_layer=1, n_head=1, n_embd=4)
        self.script, self.prompt_width, self.calls = torch.tensor(script), prompt_width, 0

    def forward(self, input_ids, attention_mask, position_ids, kv_cache=None):
        self.calls += 1
        B, T = input_ids.shape
        end = T if kv_cache is None else kv_cache.length + T  # sequence length after this call
        logits = torch.full((B, T, V), -30.0)
        logits[torch.arange(B), -1, self.script[:, end - self.prompt_width]] = 30.0
        if kv_cache is None:
            return logits
        kv_cache.length = end
        return logits, kv_cache


@pytest.mark.parametrize("use_kv_cache", [True, False])
def test_masks_and_lengths_at_the_limits(use_kv_cache):
    script = [
        [5, 6, 7, 8],  # never ends: exactly the limit, no EOS
        [EOS, 5, 6, 7],  # immediate EOS
        [5, EOS, 6, 7],  # ends at step 2
        [5, 6, 7, EOS],  # EOS as the last allowed token
    ]
    prompt_ids, prompt_mask = mixed_prompts(batch=4, width=3)
    out = generate(ScriptedModel(script, 3), prompt_ids, prompt_mask, max_new_tokens=4, eos_id=EOS, pad_id=PAD,
                   do_sample=False, use_kv_cache=use_kv_cache)
    assert out.responses.tolist() == [[5, 6, 7, 8], [EOS, PAD, PAD, PAD], [5, EOS, PAD, PAD], [5, 6, 7, EOS]]
    assert out.response_mask.tolist() == [[1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1]]
    assert out.response_length.tolist() == [4, 1, 2, 4]
    assert out.log_probs[out.response_mask == 0].eq(0).all()


@pytest.mark.parametrize("use_kv_cache", [True, False])
def test_loop_stops_when_all_rows_are_done(use_kv_cache):
    script = [[5, EOS, 6, 6, 6, 6], [EOS, 6, 6, 6, 6, 6]]
    prompt_ids, prompt_mask = mixed_prompts(batch=2, width=3)
    scripted = ScriptedModel(script, 3)
    out = generate(scripted, prompt_ids, prompt_mask, max_new_tokens=6, eos_id=EOS, pad_id=PAD,
                   do_sample=False, use_kv_cache=use_kv_cache)
    assert out.responses.shape == (2, 6)  # always the full width
    assert out.response_length.tolist() == [2, 1]
    assert scripted.calls == 2  # prefill/step 0 and step 1, then everyone is done


# ---- log-probs and values

def test_compute_log_prob_equals_generation_log_probs(model):
    prompt_ids, prompt_mask = mixed_prompts()
    out = generate(model, prompt_ids, prompt_mask, max_new_tokens=8, eos_id=EOS, pad_id=PAD, temperature=0.7,
                   generator=torch.Generator().manual_seed(2))
    input_ids, attention_mask, position_ids = build_sequences(prompt_ids, prompt_mask, out)
    log_probs, entropy = compute_log_prob(model, input_ids, attention_mask, position_ids, out.responses, 0.7)
    assert log_probs.shape == entropy.shape == (48, 8)
    m = out.response_mask.bool()
    torch.testing.assert_close(log_probs[m], out.log_probs[m], atol=1e-5, rtol=0)


def test_compute_log_prob_positions_and_entropy(model):
    input_ids, mask = mixed_prompts(batch=3, width=9)
    responses = input_ids[:, -3:]  # P = 6, R = 3
    pos = position_ids_from_mask(mask)
    log_probs, entropy = compute_log_prob(model, input_ids, mask, pos, responses, temperature=2.0)
    logits = model(input_ids, mask, pos) / 2.0
    for j in range(3):  # response token j is predicted at position P - 1 + j
        dist = torch.distributions.Categorical(logits=logits[:, 5 + j])
        torch.testing.assert_close(log_probs[:, j], dist.log_prob(responses[:, j]), atol=1e-5, rtol=0)
        torch.testing.assert_close(entropy[:, j], dist.entropy(), atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="temperature"):
        compute_log_prob(model, input_ids, mask, pos, responses, temperature=0.0)


def test_critic_from_base_copies_trunk_and_starts_near_zero(model):
    critic = TinyGPTCritic.from_base(model)
    actor_state, critic_state = model.transformer.state_dict(), critic.transformer.state_dict()
    assert actor_state.keys() == critic_state.keys()
    for name, a in actor_state.items():
        b = critic_state[name]
        assert torch.equal(a, b), name
        assert a.data_ptr() != b.data_ptr()  # a copy, not shared
    assert critic.value_head.weight.abs().max() < 0.1 and critic.value_head.bias.eq(0).all()


def test_compute_values_reads_the_state_before_each_response_token(model):
    torch.manual_seed(0)
    critic = TinyGPTCritic.from_base(model)
    torch.nn.init.normal_(critic.value_head.weight)  # make values distinguishable
    input_ids, mask = mixed_prompts(batch=3, width=9)
    pos = position_ids_from_mask(mask)
    values = compute_values(critic, input_ids, mask, pos, response_length=3)
    assert values.shape == (3, 3)
    for j in range(3):  # the value before response token j is the critic's output on the prefix [: P + j]
        end = 6 + j
        prefix = critic(input_ids[:, :end], mask[:, :end], pos[:, :end])[:, -1]
        torch.testing.assert_close(values[:, j], prefix, atol=1e-5, rtol=0)


# ---- FLOPs, parameters, peaks

TINY = GPTConfig(vocab_size=17, block_size=16, n_layer=1, n_head=2, n_embd=8)


def test_count_params_hand_count():
    # wte 17*8=136, wpe 16*8=128, ln_f 16; block: ln_1 16, qkv 8*24+24=216, proj 8*8+8=72,
    # ln_2 16, fc 8*32+32=288, mlp proj 32*8+8=264 -> 872; lm_head tied to wte
    assert count_params(TINY) == 136 + 128 + 872 + 16 == 1152
    assert count_params(TINY) == sum(p.numel() for p in TinyGPT(TINY).parameters())
    default = GPTConfig(vocab_size=17, block_size=32)
    assert count_params(default) == sum(p.numel() for p in TinyGPT(default).parameters()) == 103232


def test_count_flops_hand_count():
    # matmul weights: qkv 8*24=192, proj 64, fc 256, mlp proj 256, lm_head 17*8=136 -> 904
    assert count_matmul_params(TINY) == 904
    # two sequences of 3 and 5 tokens: 6*904*8 = 43392; attention 6*(9+25)*head_dim 4*heads 2*layers 1 = 1632
    assert count_flops(TINY, [3, 5]) == 43392 + 1632

