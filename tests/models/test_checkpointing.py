"""Activation checkpointing of the tiny GPT's blocks: the same numbers as without it, for one model, a stack of agents
and a view of some agents (whose weights are swapped in only while the view's forward runs)."""

from __future__ import annotations

import copy

import pytest
import torch

from playground.models.agents import AgentView, stack_agents
from playground.models.tiny_gpt import GPTConfig, TinyGPT, compute_log_prob

ROWS, WIDTH, RESPONSE = 6, 16, 8


def _inputs(agents: int = 1):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 17, (agents * ROWS, WIDTH), generator=g)
    return ids, torch.ones_like(ids), torch.arange(WIDTH).expand(agents * ROWS, -1), ids[:, -RESPONSE:]


def _grads(model: torch.nn.Module, net, checkpointing: bool, agents: int = 1):
    """The parameters' gradients and the log-probs of one forward and backward through `net` (model or a view)."""
    model.transformer.gradient_checkpointing = checkpointing
    model.zero_grad(set_to_none=True)
    log_probs, entropy = compute_log_prob(net, *_inputs(agents))
    (log_probs.sum() + entropy.sum()).backward()
    return [p.grad.clone() for p in model.parameters()], log_probs.detach()


@pytest.fixture(scope="module")
def base() -> TinyGPT:
    torch.manual_seed(0)
    return TinyGPT(GPTConfig(vocab_size=17, block_size=WIDTH)).train()


def test_checkpointed_blocks_give_the_same_log_probs_and_gradients(base):
    model = copy.deepcopy(base)
    plain, plain_lp = _grads(model, model, checkpointing=False)
    recomputed, recomputed_lp = _grads(model, model, checkpointing=True)
    assert torch.equal(plain_lp, recomputed_lp)
    assert all(torch.equal(a, b) for a, b in zip(plain, recomputed))


def test_checkpointing_a_view_of_one_agent_recomputes_with_that_agents_weights(base):
    """The view's weights (agent 1's slice) exist only during its forward: the recomputation in backward must run
    on them, not on the whole stack's."""
    other = copy.deepcopy(base)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(0.01 * torch.randn_like(p))
    stacked = stack_agents([base, other]).train()
    view = AgentView.agents(stacked, slice(1, 2))
    plain, plain_lp = _grads(stacked, view, checkpointing=False)
    recomputed, recomputed_lp = _grads(stacked, view, checkpointing=True)
    assert torch.equal(plain_lp, recomputed_lp)
    assert all(torch.equal(a, b) for a, b in zip(plain, recomputed))
    assert all(float(g[0].abs().max()) == 0 for g in recomputed)  # agent 0 was not in the view


def test_each_block_is_recomputed_once_in_backward_and_never_without_gradients(base):
    model = copy.deepcopy(base)
    model.transformer.gradient_checkpointing = True
    calls = []
    model.transformer.after_recompute = lambda: calls.append(1)
    with torch.no_grad():
        compute_log_prob(model, *_inputs())
    log_probs, _ = compute_log_prob(model, *_inputs())
    log_probs.sum().backward()
    assert len(calls) == model.config.n_layer  # one recomputation per block, in backward
