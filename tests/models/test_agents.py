"""K agents as one tiny GPT: the stacked layers, `stack_agents`, `AgentView`, and generation with one generator per
agent, each against the agents' own models."""

from __future__ import annotations

import copy

import pytest
import torch

from playground.models.agents import AgentView, stack_agents
from playground.models.tiny_gpt import (
    GPTConfig,
    TinyGPT,
    TinyGPTCritic,
    compute_log_prob,
    compute_values,
    position_ids_from_mask,
)
from playground.rollout.decode import generate

V, PAD, BOS, EOS = 17, 0, 1, 2
K, ROWS = 3, 8


@pytest.fixture(scope="module")
def models() -> list[TinyGPT]:
    """Three different models of one shape."""
    out = []
    for seed in range(K):
        torch.manual_seed(seed)
        out.append(TinyGPT(GPTConfig(vocab_size=V, block_size=24)).eval())
    return out


def prompts(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded prompts of lengths 2..7: BOS then random digits, `(ROWS, 7)`."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 13, (ROWS, 7), generator=g)
    lengths = torch.randint(2, 8, (ROWS,), generator=g)
    mask = (torch.arange(7)[None, :] >= 7 - lengths[:, None]).long()
    ids[torch.arange(ROWS), 7 - lengths] = BOS
    return ids.masked_fill(mask == 0, PAD), mask


def agent_rows() -> tuple[torch.Tensor, torch.Tensor]:
    """Each agent's own prompts, agent-major `(K·ROWS, 7)`."""
    parts = [prompts(k) for k in range(K)]
    return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])


def test_stacked_parameters_keep_names_shapes_and_the_tied_head(models):
    stacked = stack_agents(models)
    assert stack_agents(models[:1]) is models[0]  # one agent: the plain model
    assert stacked.lm_head.weight is stacked.transformer.wte.weight
    for (name, p), (_, q) in zip(stacked.named_parameters(), models[0].named_parameters(), strict=True):
        assert p.shape == (K, *q.shape), name
        for k in range(K):
            assert torch.equal(p[k], dict(models[k].named_parameters())[name]), name


def test_a_stacked_forward_is_each_agents_own_forward(models):
    stacked = stack_agents(models)
    ids, mask = agent_rows()
    pos = position_ids_from_mask(mask)
    logits = stacked(ids, mask, pos).view(K, ROWS, 7, V)
    for k, model in enumerate(models):
        own = model(*prompts(k), position_ids_from_mask(prompts(k)[1]))
        torch.testing.assert_close(logits[k], own, atol=1e-5, rtol=0)
    view = AgentView.agents(stacked, slice(1, 3))  # some of the agents, gradients reaching the stacked weights
    part = view(ids[ROWS:], mask[ROWS:], pos[ROWS:])
    torch.testing.assert_close(part, logits[1:].reshape(-1, 7, V), atol=1e-6, rtol=0)
    part.sum().backward()
    grad = stacked.transformer.wpe.weight.grad
    assert grad[0].eq(0).all() and grad[1:].abs().sum() > 0


def test_stacked_log_probs_values_and_gradients_match_each_agent(models):
    actors = [copy.deepcopy(m).train() for m in models]
    critics = [TinyGPTCritic.from_base(m) for m in actors]
    ids, mask = agent_rows()
    pos = position_ids_from_mask(mask)
    responses = ids[:, -3:]
    stacked, stacked_critic = stack_agents(actors), stack_agents(critics)
    log_probs, entropy = compute_log_prob(stacked, ids, mask, pos, responses, temperature=0.7)
    (log_probs.sum() + entropy.sum()).backward()
    values = compute_values(stacked_critic, ids, mask, pos, 3)
    for k, actor in enumerate(actors):
        rows = slice(k * ROWS, (k + 1) * ROWS)
        own_lp, own_ent = compute_log_prob(actor, ids[rows], mask[rows], pos[rows], responses[rows], temperature=0.7)
        (own_lp.sum() + own_ent.sum()).backward()
        torch.testing.assert_close(log_probs[rows], own_lp, atol=1e-5, rtol=0)
        torch.testing.assert_close(values[rows], compute_values(critics[k], ids[rows], mask[rows], pos[rows], 3),
                                   atol=1e-5, rtol=0)
        for (name, p), q in zip(stacked.named_parameters(), actor.parameters(), strict=True):
            torch.testing.assert_close(p.grad[k], q.grad, atol=1e-5, rtol=1e-4, msg=name)


@pytest.mark.parametrize("kwargs", [dict(temperature=1.0), dict(temperature=0.7, top_p=0.9), dict(do_sample=False)])
def test_batched_generation_gives_each_agent_its_own_rollout(models, kwargs):
    """Each agent samples with its own generator, drawing only while its rows run: as if it generated alone."""
    models = [_always_ends(models[0]), *models[1:]]  # agent 0's rows all end at once; the others run on
    ids, mask = agent_rows()
    gens = [torch.Generator().manual_seed(10 + k) for k in range(K)]
    out = generate(stack_agents(models), ids, mask, max_new_tokens=8, eos_id=EOS, pad_id=PAD, generator=gens,
                   **kwargs)
    assert out.response_length[:ROWS].eq(1).all() and out.response_length[ROWS:].gt(1).any()
    for k, model in enumerate(models):
        own_gen = torch.Generator().manual_seed(10 + k)
        own = generate(model, *prompts(k), max_new_tokens=8, eos_id=EOS, pad_id=PAD, generator=own_gen, **kwargs)
        rows = slice(k * ROWS, (k + 1) * ROWS)
        assert torch.equal(out.responses[rows], own.responses), k
        assert torch.equal(out.response_mask[rows], own.response_mask), k
        torch.testing.assert_close(out.log_probs[rows], own.log_probs, atol=1e-5, rtol=0)
        assert torch.equal(gens[k].get_state(), own_gen.get_state()), k  # the same draws, no more


def _always_ends(model: TinyGPT) -> TinyGPT:
    """A copy whose final hidden state points at EOS's embedding: it answers EOS at once, with certainty."""
    model = copy.deepcopy(model)
    eos = model.transformer.wte.weight[EOS].detach()
    with torch.no_grad():
        model.transformer.ln_f.weight.zero_()
        model.transformer.ln_f.bias.copy_(100 * eos / eos.square().sum())
    return model
