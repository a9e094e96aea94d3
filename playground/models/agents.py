"""K agents' networks as one model: torch's layers that also take K agents' weights, and the stacking.

A layer whose weight has one dim more than torch's layer takes holds K agents' weights (`(K, ...)`); its input is
the K agents' rows agent-major (agent 0's rows, then agent 1's, ...), and it applies agent k's weights to agent k's
rows in one batched op (the gym MLPs' `baddbmm`, `models/mlp.py`). With torch's shapes it is torch's layer, bit for
bit, so a model built from these layers trains one agent exactly as before and K agents after `stack_agents`.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, TypeVar

import torch
import torch.nn as nn
from torch.nn import functional as F


def _agent_rows(x: torch.Tensor, num_agents: int) -> torch.Tensor:
    """`(K·rows, ..., C)` → `(K, rows·..., C)`: each agent's rows side by side, agent-major as the batch is."""
    return x.reshape(num_agents, -1, x.shape[-1])


class AgentLinear(nn.Linear):
    """`nn.Linear`, or with weight `(K, out, in)` and bias `(K, out)` one `baddbmm` over the K agents' rows."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight.dim() == 2:
            return super().forward(x)
        weight = self.weight.transpose(1, 2)  # (K, in, out)
        rows = _agent_rows(x, weight.shape[0])
        y = torch.bmm(rows, weight) if self.bias is None else torch.baddbmm(self.bias.unsqueeze(1), rows, weight)
        return y.view(*x.shape[:-1], weight.shape[-1])


class AgentLayerNorm(nn.LayerNorm):
    """`nn.LayerNorm`, or with weight and bias `(K, C)` the normalisation, then each agent's scale and shift."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight.dim() == 1:
            return super().forward(x)
        rows = _agent_rows(F.layer_norm(x, self.normalized_shape, eps=self.eps), self.weight.shape[0])
        y = rows * self.weight.unsqueeze(1)
        return (y if self.bias is None else y + self.bias.unsqueeze(1)).view(x.shape)


class AgentEmbedding(nn.Embedding):
    """`nn.Embedding`, or with weight `(K, n, C)` a lookup of agent k's rows in agent k's table (one table of K·n
    entries, each agent's ids offset by k·n)."""

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if self.weight.dim() == 2:
            return super().forward(ids)
        num_agents, size = self.weight.shape[:2]
        offsets = torch.arange(num_agents, device=ids.device).unsqueeze(1) * size  # (K, 1)
        flat_ids = (ids.reshape(num_agents, -1) + offsets).view(ids.shape)
        return F.embedding(flat_ids, self.weight.reshape(num_agents * size, -1))


AgentModel = TypeVar("AgentModel", bound=nn.Module)  # stacking keeps the model's class (a copy of the first)


def stack_agents(models: Sequence[AgentModel]) -> AgentModel:
    """One module for K agents: a copy of the first whose every parameter is the K models' parameters stacked
    `(K, ...)`; its forward takes the agents' rows agent-major. One model is returned as is (K = 1 runs torch's
    layers, bit for bit as before)."""
    if len(models) == 1:
        return models[0]
    stacked = copy.deepcopy(models[0])
    by_name = [dict(m.named_parameters(remove_duplicate=False)) for m in models]
    made: dict[int, nn.Parameter] = {}
    for name, param in models[0].named_parameters(remove_duplicate=False):
        if id(param) not in made:  # a tied parameter is stacked once and set under each of its names
            values = torch.stack([params[name].detach() for params in by_name])
            made[id(param)] = nn.Parameter(values, requires_grad=param.requires_grad)
        module_name, _, leaf = name.rpartition(".")
        setattr(stacked.get_submodule(module_name), leaf, made[id(param)])
    return stacked


# A model or an `AgentView` of some agents' weights in it: called alike, so a pass takes either (a view is no Module)
ModelOrView = Any


class AgentView:
    """A model called with other parameters (`torch.func.functional_call`; tied weights stay tied): some agents of a
    stacked model (`agents`), or one model's weights shared by K agents (`shared`)."""

    def __init__(self, model: nn.Module, params: dict[str, torch.Tensor]):
        self.model, self.config, self.params = model, model.config, params

    @classmethod
    def agents(cls, stacked: nn.Module, agents: slice | Sequence[int]) -> AgentView:
        """These agents of a stacked model (`stack_agents`): a range slices views, so gradients reach the stacked
        parameters; a list of agents copies theirs (for a rollout of some of the agents)."""
        device = next(stacked.parameters()).device
        index = agents if isinstance(agents, slice) else torch.as_tensor(list(agents), device=device)
        return cls(stacked, {name: param[index] for name, param in stacked.named_parameters()})

    @classmethod
    def shared(cls, model: nn.Module, num_agents: int) -> AgentView:
        """One model as K agents that all have its weights (broadcast, not copied): it runs the same stacked ops as
        the agents' own models, so where an agent's weights still equal it, their outputs are equal bit for bit."""
        return cls(model, {name: param.expand(num_agents, *param.shape) for name, param in model.named_parameters()})

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return torch.func.functional_call(self.model, self.params, args, kwargs)
