"""Any gymnasium id as K agents × N envs of torch tensors, through gymnasium's own vector envs.

gymnasium 1.x vector envs auto-reset in NEXT_STEP mode: the step after an episode ends ignores the
action and returns the reset observation with reward 0. That step is not a transition of the MDP; it is
returned here with `valid = False`, so the trainer masks it out of the loss and of episode statistics.
"""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor

import playground.envs.probes  # noqa: F401  (registers the probe ids)
from playground.envs import EnvStep


class GymnasiumEnv:
    """K independent gymnasium vector envs (one per agent, seeded by the agent's seed).

    Args:
        env_id: any registered gymnasium id. num_envs: N per agent. seeds: one per agent.
    """

    def __init__(self, env_id: str, num_agents: int, num_envs: int, seeds: Sequence[int],
                 device: str | torch.device = "cpu"):
        self.env_id = env_id
        self.device = torch.device(device)
        spec = gym.spec(env_id)
        mode = "vector_entry_point" if spec.vector_entry_point else "sync"
        self.envs = [gym.make_vec(env_id, num_envs=num_envs, vectorization_mode=mode) for _ in range(num_agents)]
        self.seeds = list(seeds)
        space = self.envs[0].single_action_space
        self.discrete = isinstance(space, gym.spaces.Discrete)
        self.num_actions: int | None = None  # discrete actions
        self.action_dim: int | None = None  # continuous actions: a Box's
        self.action_low: Tensor | None = None
        self.action_high: Tensor | None = None
        if isinstance(space, gym.spaces.Discrete):
            self.num_actions = int(space.n)
        else:
            assert isinstance(space, gym.spaces.Box), f"{env_id}: actions of a {space} are neither discrete nor a Box"
            self.action_dim = int(np.prod(space.shape))
            self.action_low = torch.as_tensor(space.low, dtype=torch.float32)
            self.action_high = torch.as_tensor(space.high, dtype=torch.float32)
        obs_shape = self.envs[0].single_observation_space.shape
        assert obs_shape is not None, f"{env_id}: an observation space without a shape"
        self.obs_dim = int(np.prod(obs_shape))
        self.max_episode_steps = spec.max_episode_steps
        self._autoreset = np.zeros((num_agents, num_envs), dtype=bool)

    def _tensor(self, arrays: list[np.ndarray], dtype: torch.dtype = torch.float32) -> Tensor:
        return torch.as_tensor(np.stack(arrays), dtype=dtype, device=self.device)

    def reset(self) -> Tensor:
        obs = [env.reset(seed=seed)[0].reshape(env.num_envs, -1) for env, seed in zip(self.envs, self.seeds)]
        self._autoreset[:] = False
        return self._tensor(obs)

    def step(self, action: Tensor) -> EnvStep:
        actions = action.detach().cpu().numpy()
        results = [env.step(a) for env, a in zip(self.envs, actions)]
        obs = self._tensor([r[0].reshape(len(r[0]), -1) for r in results])
        terminated = np.stack([r[2] for r in results])
        truncated = np.stack([r[3] for r in results])
        valid = ~self._autoreset
        self._autoreset = terminated | truncated
        return EnvStep(
            obs=obs,
            reward=self._tensor([r[1] for r in results]),
            terminated=torch.as_tensor(terminated, device=self.device),
            truncated=torch.as_tensor(truncated, device=self.device),
            final_obs=obs,
            valid=torch.as_tensor(valid, device=self.device),
        )

    def close(self) -> None:
        for env in self.envs:
            env.close()
