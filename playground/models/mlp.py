"""K independent MLP agents as one flat parameter tensor: the gym tasks' actor and critic.

Every agent's weights live in one row of a `(K, P)` tensor; each layer is a view of it and runs as one
`baddbmm` over agents, so K agents cost a few large ops instead of K times many small ones, and a solo
run is simply K = 1. Initialisation follows the 37 implementation details of PPO (Huang et al. 2022):
orthogonal weights, gain √2 on hidden layers, 0.01 on the policy head, 1 on the value head, zero biases.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from playground.algos.masked import entropy_from_logits

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
_LAYOUT_WARNING = "grad and param do not obey the gradient layout contract"
# The gradient views below are strided slices of one buffer on purpose (autograd still accumulates into them
# in place); torch's notice that such a layout "may impair performance" is about the layout we chose.
warnings.filterwarnings("ignore", message=_LAYOUT_WARNING)


class AgentMLP:
    """`num_agents` MLPs with tanh hidden layers, weights in `self.flat` `(K, P)`.

    Each layer's weight and bias are leaf tensors that are views of `flat`, and their gradients are views of one
    `(K, P)` gradient buffer: autograd accumulates into the buffer in place, and the optimizer updates `flat` with
    `flat.grad` as a single tensor (no per-layer copies, no scatter of a full-size gradient per view).

    Args:
        sizes: layer widths, input first, output last (e.g. `[4, 64, 64, 2]`).
        generators: one `torch.Generator` per agent: agent k's weights depend only on its own seed.
        out_gain: orthogonal gain of the output layer. extra: trailing free parameters per agent (log-std).
    """

    def __init__(self, sizes: Sequence[int], generators: Sequence[torch.Generator], out_gain: float,
                 extra: int = 0, extra_init: float = 0.0, device: str | torch.device = "cpu"):
        self.sizes = list(sizes)
        self.num_agents = len(generators)
        self.layers: list[tuple[int, int, int, int]] = []  # (weight offset, in, out, bias offset)
        offset = 0
        for fan_in, fan_out in zip(self.sizes[:-1], self.sizes[1:]):
            self.layers.append((offset, fan_in, fan_out, offset + fan_in * fan_out))
            offset += fan_in * fan_out + fan_out
        self.extra = (offset, extra)
        flat = torch.zeros(self.num_agents, offset + extra)
        for k, gen in enumerate(generators):
            for i, (w, fan_in, fan_out, _) in enumerate(self.layers):
                gain = out_gain if i == len(self.layers) - 1 else math.sqrt(2)
                weight = torch.empty(fan_out, fan_in)
                torch.nn.init.orthogonal_(weight, gain=gain, generator=gen)
                flat[k, w:w + fan_in * fan_out] = weight.t().reshape(-1)  # stored (in, out) for x @ W
        flat[:, offset:] = extra_init
        self.flat = flat.to(device)
        self.flat.grad = torch.zeros_like(self.flat)
        self._layer_views = self._leaves(self._views(self.flat), self._views(self.flat.grad))
        start, size = self.extra
        extra_view, extra_grad = self.flat[:, start:start + size], self.flat.grad[:, start:start + size]
        self._extra = self._leaves([(extra_view,)], [(extra_grad,)])[0][0]

    @staticmethod
    def _leaves(views: Sequence[Sequence[Tensor]], grad_views: Sequence[Sequence[Tensor]]) -> list[tuple[Tensor, ...]]:
        """Trainable leaves sharing `flat`'s storage, each with its gradient a view of the shared buffer."""
        leaves = []
        for group, grads in zip(views, grad_views):
            made = []
            for view, grad in zip(group, grads):
                leaf = view.detach().requires_grad_(True)
                leaf.grad = grad
                made.append(leaf)
            leaves.append(tuple(made))
        return leaves

    def _views(self, flat: Tensor) -> list[tuple[Tensor, Tensor]]:
        k = flat.shape[0]
        return [(flat[:, w:w + fan_in * fan_out].view(k, fan_in, fan_out), flat[:, b:b + fan_out].unsqueeze(1))
                for w, fan_in, fan_out, b in self.layers]

    @property
    def num_params(self) -> int:
        return self.flat.shape[1]

    def forward(self, x: Tensor, flat: Tensor | None = None) -> Tensor:
        """`(K, B, in)` → `(K, B, out)`; `flat` substitutes other weights (a frozen reference copy)."""
        views = self._layer_views if flat is None else self._views(flat)
        last = len(views) - 1
        for i, (weight, bias) in enumerate(views):
            x = torch.baddbmm(bias, x, weight)  # (K, B, out)
            if i < last:
                x = torch.tanh(x)
        return x

    def extra_params(self, flat: Tensor | None = None) -> Tensor:
        if flat is None:
            return self._extra
        start, size = self.extra
        return flat[:, start:start + size]


class GymActor:
    """A categorical (discrete actions) or diagonal-Gaussian (continuous) policy over an `AgentMLP`.

    Log-probabilities and entropy use logits divided by the rollout temperature, as verl does for tokens
    (a Gaussian policy ignores the temperature). The Gaussian's log-std is a free parameter per action dim.
    """

    def __init__(self, obs_dim: int, hidden: Sequence[int], generators: Sequence[torch.Generator], *,
                 num_actions: int | None = None, action_dim: int | None = None, temperature: float = 1.0,
                 init_log_std: float = 0.0, device: str | torch.device = "cpu"):
        self.discrete = num_actions is not None
        if num_actions is not None:
            out, extra = num_actions, 0
        else:
            assert action_dim is not None, "a policy needs num_actions (discrete) or action_dim (continuous)"
            out = extra = action_dim
        self.net = AgentMLP([obs_dim, *hidden, out], generators, out_gain=0.01,
                            extra=extra, extra_init=init_log_std, device=device)
        self.temperature = temperature

    @property
    def params(self) -> list[Tensor]:
        return [self.net.flat]

    def max_entropy(self) -> float | None:
        """ln |A| for discrete actions (relative entropy = H / ln |A|); None for a Gaussian."""
        return math.log(self.net.sizes[-1]) if self.discrete else None

    def distribution_params(self, obs: Tensor, flat: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        out = self.net.forward(obs, flat)
        if self.discrete:
            return (out if self.temperature == 1.0 else out / self.temperature), None
        return out, self.net.extra_params(flat).unsqueeze(1).expand_as(out)

    @torch.no_grad()
    def act(self, obs: Tensor, noise: Tensor | None) -> Tensor:
        """Sample (or, with `noise=None`, take the most likely) actions.

        Args:
            obs: `(K, N, obs_dim)`. noise: pre-drawn per-step randomness: Gumbel noise `(K, N, |A|)` for
                discrete actions (argmax(logits + g) samples the categorical exactly), standard normal
                `(K, N, action_dim)` for Gaussian ones.

        Returns:
            `(K, N)` int64 or `(K, N, action_dim)` float actions.
        """
        first, log_std = self.distribution_params(obs)
        if self.discrete:  # argmax never raises on NaN: a diverged agent cannot break its neighbours' sampling
            return (first if noise is None else first + noise).argmax(-1)
        assert log_std is not None  # a Gaussian's
        return first if noise is None else first + log_std.exp() * noise

    def log_prob_and_entropy(self, batch: Mapping[str, Any], flat: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Log-probability of `batch["actions"]` and entropy per transition, each `(K, B, 1)`."""
        first, log_std = self.distribution_params(batch["obs"], flat)
        actions = batch["actions"]
        if self.discrete:
            log_probs = torch.log_softmax(first, dim=-1)
            logp = log_probs.gather(-1, actions.unsqueeze(-1))
            return logp, entropy_from_logits(first).unsqueeze(-1)
        assert log_std is not None  # a Gaussian's
        z = (actions - first) * torch.exp(-log_std)
        logp = (-0.5 * z.square() - log_std - _LOG_SQRT_2PI).sum(-1, keepdim=True)
        entropy = (0.5 + _LOG_SQRT_2PI + log_std).sum(-1, keepdim=True)
        return logp, entropy


class GymCritic:
    """A state-value MLP: `values(batch)` → `(K, B, 1)`."""

    def __init__(self, obs_dim: int, hidden: Sequence[int], generators: Sequence[torch.Generator],
                 device: str | torch.device = "cpu"):
        self.net = AgentMLP([obs_dim, *hidden, 1], generators, out_gain=1.0, device=device)

    @property
    def params(self) -> list[Tensor]:
        return [self.net.flat]

    def values(self, batch: Mapping[str, Any]) -> Tensor:
        return self.net.forward(batch["obs"])


class MLPWorldModel:
    """Predicts the next observation and the reward from (observation, action): `world_model/loss` (MSE)."""

    def __init__(self, obs_dim: int, action_size: int, hidden: Sequence[int],
                 generators: Sequence[torch.Generator], discrete: bool, device: str | torch.device = "cpu"):
        self.discrete, self.action_size = discrete, action_size
        self.net = AgentMLP([obs_dim + action_size, *hidden, obs_dim + 1], generators, out_gain=1.0, device=device)

    @property
    def params(self) -> list[Tensor]:
        return [self.net.flat]

    def loss(self, batch: Mapping[str, Any]) -> Tensor:
        """Masked mean squared error per agent `(K,)` of predicting `final_obs` and the raw reward (`scores`) from
        `obs` and `actions` (a gym batch: `(K, B, ...)`)."""
        obs, actions, next_obs = batch["obs"], batch["actions"], batch["final_obs"]
        reward, mask = batch["scores"].squeeze(-1), batch["response_mask"].squeeze(-1)
        if self.discrete:
            actions = torch.nn.functional.one_hot(actions, self.action_size).to(obs.dtype)
        pred = self.net.forward(torch.cat([obs, actions], dim=-1))
        target = torch.cat([next_obs, reward.unsqueeze(-1)], dim=-1)
        err = (pred - target).square().mean(-1) * mask
        return err.sum(-1) / mask.sum(-1).clamp(min=1)
