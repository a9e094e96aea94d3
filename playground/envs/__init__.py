"""Batched environments for the gym tasks: torch-native ports (`torch_classic`) and gymnasium's vector envs
(`gym_vector`), both stepping K agents × N envs and returning an `EnvStep`."""

from __future__ import annotations

from typing import NamedTuple

from torch import Tensor


class EnvStep(NamedTuple):
    """One step of K agents × N envs."""

    obs: Tensor  # (K, N, obs_dim) float32: the next policy input, already the reset observation where done
    reward: Tensor  # (K, N) float32
    terminated: Tensor  # (K, N) bool
    truncated: Tensor  # (K, N) bool: time limit reached and not terminated
    final_obs: Tensor  # (K, N, obs_dim) float32: the true next observation, before any reset
    valid: Tensor | None = None  # (K, N) bool, False on a step that is no transition (gymnasium's autoreset step)
