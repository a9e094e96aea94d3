"""Per-agent hyperparameters: K configs trained as one batch read each knob as a `(K,)` tensor.

An ordinary run is K = 1. Which keys may differ between the agents of a batch is `batched.PER_AGENT_KEYS`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from omegaconf import DictConfig, OmegaConf

from playground.config import ConfigError


class AgentHParams:
    """Per-agent hyperparameters of K configs as `(K,)` tensors (`view3` gives `(K, 1, 1)`)."""

    def __init__(self, cfgs: Sequence[DictConfig], device: torch.device):
        self.cfgs = list(cfgs)
        self.device = device
        self._cache: dict[tuple, torch.Tensor] = {}  # configs do not change during a run

    def vector(self, key: str, none_as: float | None = None, fallback: str | None = None) -> torch.Tensor:
        """`(K,)` values of `key`; a null value becomes `none_as`, or the value of the `fallback` key."""
        cached = self._cache.get((key, none_as, fallback))
        if cached is not None:
            return cached
        values = []
        for cfg in self.cfgs:
            value = OmegaConf.select(cfg, key)
            if value is None:
                value = OmegaConf.select(cfg, fallback) if fallback is not None else none_as
            if value is None:
                raise ConfigError(f"{key} is null and has no default")
            values.append(float(value))
        vector = torch.tensor(values, dtype=torch.float32, device=self.device)
        self._cache[(key, none_as, fallback)] = vector
        return vector

    def view3(self, key: str, **kw) -> torch.Tensor:
        return self.vector(key, **kw).view(-1, 1, 1)
