"""Two remedies for a gym task whose reward the starting policy never reaches (MountainCar: every return −200).

`ScaledObs` (`env.normalize_obs`) maps the observation space's bounds to [−1, 1], as SB3's and CleanRL's
observation normalisation does with running statistics: MountainCar's velocity is at most 0.07, so a policy fed the
raw state barely sees the one input that tells it which way to push. `progress_shaping` (`reward.partial_credit` on
gym tasks, the token tasks' name for credit short of success) adds the potential-based term
`F = scale · (γ·Φ(s') − Φ(s))` (Ng, Harada and Russell 1999) to the reward the agent trains on, never to the score.

Measured on panel seeds 101-103 (docs/diagnosis-panel.md, "fix table"), MountainCar, 60 steps: either alone leaves
every return at −200 (the shaping alone also in 200 steps); both reach −105 to −131 (target −110).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor

from playground.envs import EnvStep
from playground.envs.gym_vector import GymnasiumEnv
from playground.envs.torch_classic import TorchClassicEnv


class ScaledObs:
    """An env whose observations (and final observations) are `(obs − centre) / half_range` of the observation
    space's finite bounds; a dimension with an infinite bound passes unchanged. Everything else is the env's own."""

    def __init__(self, env: TorchClassicEnv | GymnasiumEnv, env_id: str, device: torch.device | str = "cpu"):
        space = gym.make(env_id).observation_space
        assert isinstance(space, gym.spaces.Box), f"{env_id}: bounds to scale by are a Box's, not a {space}'s"
        low, high = np.asarray(space.low, np.float64).ravel(), np.asarray(space.high, np.float64).ravel()
        finite = np.isfinite(low) & np.isfinite(high)
        low, high = np.where(finite, low, -1.0), np.where(finite, high, 1.0)  # an infinite dimension: centre 0, ×1
        centre, half = (low + high) / 2, (high - low) / 2
        self.env = env
        self.centre = torch.tensor(centre, dtype=torch.float32, device=device)
        self.half = torch.tensor(half, dtype=torch.float32, device=device)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def scale(self, obs: Tensor) -> Tensor:
        return (obs - self.centre) / self.half

    def unscale(self, obs: Tensor) -> Tensor:
        """The env's own observation back from a scaled one (what a potential is written on)."""
        return obs * self.half + self.centre

    def reset(self) -> Tensor:
        return self.scale(self.env.reset())

    def step(self, action: Tensor) -> EnvStep:
        step = self.env.step(action)
        return step._replace(obs=self.scale(step.obs), final_obs=self.scale(step.final_obs))


def mountaincar_energy(obs: Tensor) -> Tensor:
    """MountainCar's mechanical energy per unit mass, `v²/2 + g·sin(3x)/3` (its dynamics: `v += ... − g·cos(3x)`),
    as a fraction: 0 at rest in the valley, 1 at rest on the goal (x = 0.5). Reaching the goal needs the car to swing,
    which this rewards step by step."""
    gravity, goal = 0.0025, 0.5
    x, v = obs[..., 0], obs[..., 1]
    energy = 0.5 * v * v + gravity / 3 * torch.sin(3 * x)
    lowest, at_goal = -gravity / 3, gravity / 3 * math.sin(3 * goal)
    return (energy - lowest) / (at_goal - lowest)


# `task.progress` -> (potential on the env's own observation, its scale in reward units). MountainCar's 100 is half
# its −200 episode: 30 and 100 reached the target's neighbourhood on seeds 101-103 in 60 steps, 10 on 1/3, and 200
# let the shaped values outgrow the critic (critic_undertrained on 2/3).
POTENTIALS: dict[str, tuple[Callable[[Tensor], Tensor], float]] = {
    "mountaincar_energy": (mountaincar_energy, 100.0),
}


def progress_shaping(progress: str, gamma: float,
                     unscale: Callable[[Tensor], Tensor] | None = None) -> Callable[[Tensor, Tensor], Tensor]:
    """`F(obs, next_obs) = scale · (γ·Φ(next) − Φ(obs))` for the task's potential. `next_obs` is the true next
    observation also where an episode ended: a terminal state keeps its potential rather than Ng's Φ = 0, which
    would charge the goal's whole potential on the step that reaches it."""
    if progress not in POTENTIALS:
        raise ValueError(f"task.progress={progress!r} is out of range: allowed {', '.join(sorted(POTENTIALS))}")
    potential, scale = POTENTIALS[progress]
    raw = unscale or (lambda o: o)

    def shaping(obs: Tensor, next_obs: Tensor) -> Tensor:
        return scale * (gamma * potential(raw(next_obs)) - potential(raw(obs)))

    return shaping
