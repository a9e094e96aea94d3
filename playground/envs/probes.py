"""Andy Jones' five probe environments ("Debugging RL, Without the Agonizing Pain"), as gymnasium envs.

Each isolates one part of a PPO implementation and has a known answer (ARENA's tolerances: values 5e-4,
probabilities 1e-3). Registered as `playground/Probe1-v0` ... `playground/Probe5-v0` on import.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class _Probe(gym.Env):
    """Shared frame: float observation of size 1, at most two steps."""

    num_actions = 1
    observation_space = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)

    def __init__(self) -> None:
        self.action_space = spaces.Discrete(self.num_actions)
        self._obs = 0.0
        self._t = 0

    def _observe(self) -> np.ndarray:
        return np.array([self._obs], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        self._obs = self._first_obs()
        return self._observe(), {}

    def _first_obs(self) -> float:
        return 0.0


class Probe1(_Probe):
    """One action, zero observation, one step, reward +1: the value must be 1 (value loss and optimiser)."""

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        return self._observe(), 1.0, True, False, {}


class Probe2(_Probe):
    """One action, observation ±1 at random, one step, reward = observation: V(obs) = obs (backprop)."""

    def _first_obs(self) -> float:
        return float(self.np_random.choice([-1.0, 1.0]))

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        return self._observe(), self._obs, True, False, {}


class Probe3(_Probe):
    """One action, observation 0 then 1, two steps, +1 at the end: V(0) = γ, V(1) = 1 (discounting)."""

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._t += 1
        if self._t == 1:
            self._obs = 1.0
            return self._observe(), 0.0, False, False, {}
        return self._observe(), 1.0, True, False, {}


class Probe4(_Probe):
    """Two actions, zero observation, one step, reward +1 for action 1 and −1 for action 0 (policy update)."""

    num_actions = 2

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        return self._observe(), 1.0 if int(action) == 1 else -1.0, True, False, {}


class Probe5(_Probe):
    """Two actions, observation ±1, one step, +1 when the action matches the observation (0 for −1, 1 for +1).

    The policy must condition on the observation and V = +1 for both; a value net that fails here while
    probes 1-4 pass points to stale or shuffled batches.
    """

    num_actions = 2

    def _first_obs(self) -> float:
        return float(self.np_random.choice([-1.0, 1.0]))

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        correct = 1 if self._obs > 0 else 0
        return self._observe(), 1.0 if int(action) == correct else -1.0, True, False, {}


PROBES = {f"playground/Probe{i}-v0": cls for i, cls in enumerate((Probe1, Probe2, Probe3, Probe4, Probe5), 1)}
# Known answers: observation -> value / action probabilities (ARENA's expected values; γ is the run's).
PROBE_EXPECTED_VALUES = {
    1: ([[0.0]], lambda gamma: [1.0]),
    2: ([[-1.0], [1.0]], lambda gamma: [-1.0, 1.0]),
    3: ([[0.0], [1.0]], lambda gamma: [gamma, 1.0]),
    4: ([[0.0]], lambda gamma: [1.0]),
    5: ([[-1.0], [1.0]], lambda gamma: [1.0, 1.0]),
}
PROBE_EXPECTED_PROBS = {4: ([[0.0]], [[0.0, 1.0]]), 5: ([[-1.0], [1.0]], [[1.0, 0.0], [0.0, 1.0]])}

for _env_id, _cls in PROBES.items():
    if _env_id not in gym.registry:
        gym.register(id=_env_id, entry_point=f"{__name__}:{_cls.__name__}", max_episode_steps=2)
