"""How a pass runs K agents' rows through a stacked token model (the task's log-probs, the reference's, the critic's
values, validation): all agents at once, or on CPU in chunks of agents whose activations stay under a memory bound.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from playground.models.agents import AgentView, ModelOrView
from playground.models.tiny_gpt import TinyGPTCritic, compute_values
from playground.tasks.base import Batch

# On CPU a pass without gradients over many agents (rollout, old log-probs, reference, values, validation) runs in
# chunks of agents whose largest activation (the MLP's, tokens × 4·n_embd floats) stays under this, so that its memory
# does not grow with K (the memory cap measures each agent's share). For K = 32 reverse agents on 2 cores, 64 MiB
# chunks took no longer per step than none and validated fastest; 16 MiB chunks were 5 % slower (docs/tuning.md).
# 64 MiB chunks the validation of K >= 8 and every such pass of K > 32. A GPU takes all agents at once.
CPU_PASS_BYTES = 64 * 2**20


def flat_rows(x: Tensor) -> Tensor:
    """`(K, rows, ...)` → `(K·rows, ...)`: the agents' rows agent-major, as the stacked models take them."""
    return x.reshape(-1, *x.shape[2:])


class Params:
    """A model's parameters as the optimizer sees them (stacked `(K, ...)` for K > 1 agents)."""

    def __init__(self, model: torch.nn.Module):
        self.params = [p for p in model.parameters() if p.requires_grad]


class CriticView(Params):
    """The critic as the shared update calls it: `values(batch)` → `(K, bs, response_length)`."""

    def __init__(self, critic: TinyGPTCritic, passes: AgentPasses):
        super().__init__(critic)
        self.model, self.passes = critic, passes

    def values(self, mb: Batch) -> Tensor:
        def values(net: ModelOrView, input_ids: Tensor, attention_mask: Tensor, position_ids: Tensor,
                   responses: Tensor) -> tuple[Tensor]:
            return (compute_values(net, input_ids, attention_mask, position_ids, responses.shape[-1]),)
        return self.passes.forward(self.model, mb, values)[0]


class AgentPasses:
    """How a pass runs K agents' rows through a stacked model: in chunks of agents on CPU (`CPU_PASS_BYTES`), each
    chunk on a view of those agents' weights (or one shared model, the reference, for all of them). The task's
    passes and the critic's share it."""

    def __init__(self, num_agents: int, device: torch.device, n_embd: int, model_input_keys: tuple[str, ...]):
        self.num_agents, self.device, self.n_embd, self.model_input_keys = num_agents, device, n_embd, model_input_keys

    def chunks(self, agents: list[int], tokens_per_agent: int) -> list[list[int]]:
        """The agents of one pass, in chunks (`CPU_PASS_BYTES`); a GPU takes them all at once."""
        if self.device.type != "cpu":
            return [agents]
        per_chunk = max(1, CPU_PASS_BYTES // (tokens_per_agent * 4 * self.n_embd * 4))
        return [agents[i:i + per_chunk] for i in range(0, len(agents), per_chunk)]

    def view(self, model: nn.Module, agents: list[int]) -> ModelOrView:
        """The stacked `model` for these agents: itself for all of them (K = 1: the plain model)."""
        if len(agents) == self.num_agents:
            return model
        first = agents[0]
        contiguous = agents == list(range(first, first + len(agents)))
        return AgentView.agents(model, slice(first, first + len(agents)) if contiguous else agents)

    def shared(self, model: nn.Module, num_agents: int) -> ModelOrView:
        """One model (the reference) for several agents' rows, run through the agents' stacked ops (K = 1: itself):
        at step 1 an agent's log-probs then equal the reference's bit for bit and its KL loss has exactly no gradient,
        as in a run of its own. Through two code paths they differ by rounding, and Adam turns that noise into a
        full-size step (docs/tuning.md)."""
        return model if self.num_agents == 1 else AgentView.shared(model, num_agents)

    def forward(self, model: nn.Module, mb: Batch, compute: Callable[..., Sequence[Tensor]], stacked: bool = True
                ) -> list[Tensor]:
        """`compute(model, input_ids, attention_mask, position_ids, responses)` over the agents' rows in chunks of
        agents, each output `(K, rows, response_length)`. `stacked=False`: one model (the reference) for every agent's
        rows (`shared`). A rollout of some agents (`mb["agents"]`) runs on those agents' models."""
        agents, rows, width = mb["input_ids"].shape
        fields: Mapping[str, Any] = mb  # read by the keys in `model_input_keys`, which the checker cannot match
        everyone = list(range(agents))
        ids = mb.get("agents", everyone)  # the agent of each position
        # A pass with gradients (the update) takes every agent at once: its micro-batches bound its memory (a
        # checkpointed block would recompute correctly in a view too: `models.checkpointing`).
        chunks = [everyone] if torch.is_grad_enabled() else self.chunks(everyone, rows * width)
        parts = []
        for chunk in chunks:
            picked = slice(chunk[0], chunk[-1] + 1)
            inputs = [flat_rows(fields[key][picked]) for key in self.model_input_keys]
            net = self.view(model, [ids[i] for i in chunk]) if stacked else self.shared(model, len(chunk))
            outputs = compute(net, *inputs)
            parts.append([x.view(len(chunk), rows, x.shape[-1]) for x in outputs])
        return parts[0] if len(parts) == 1 else [torch.cat(xs) for xs in zip(*parts)]
