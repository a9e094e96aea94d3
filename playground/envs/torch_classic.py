"""Torch-native batched ports of gymnasium 1.4's classic-control tasks, K agents x N envs stepped as one batch.

Dynamics, constants, rewards and termination mirror `gymnasium/envs/classic_control/{cartpole,acrobot,
mountain_car,pendulum}.py`; the time limits are the registered ones; auto-reset is SAME_STEP.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from playground.envs import EnvStep


class TorchClassicEnv:
    """K agents x N envs of one task; agent k draws only from its own generator seeded with `seeds[k]`.

    Reset states come from a per-(agent, env) pool of `pool_size` pre-drawn states: the pool is redrawn, one
    generator call per agent, every `pool_size` steps (an env resets at most once per step, so it never runs dry),
    which keeps `step` free of host syncs. `pool_size` defaults to a function of N only, so agent k's trajectory
    is the same whatever K is.
    """

    env_id: str
    obs_dim: int
    state_dim: int
    discrete: bool
    num_actions: int | None = None  # discrete tasks
    action_dim: int | None = None  # continuous tasks, with action_low / action_high `(action_dim,)` float32
    action_low: Tensor | None = None
    action_high: Tensor | None = None
    max_episode_steps: int  # the registered TimeLimit
    reset_low: tuple[float, ...]  # gymnasium's `np_random.uniform(low, high)` bounds, per state dim
    reset_high: tuple[float, ...]
    obs_is_state = False  # observation == float32(state), no `_get_obs` work

    def __init__(self, num_agents: int, num_envs: int, seeds: Sequence[int], device: str | torch.device = "cpu",
                 dtype: torch.dtype = torch.float32, pool_size: int | None = None):
        if len(seeds) != num_agents:
            raise ValueError(f"need one seed per agent: got {len(seeds)} seeds for {num_agents} agents")
        self.num_agents, self.num_envs = num_agents, num_envs
        self.device, self.dtype = torch.device(device), dtype
        self.pool_size = pool_size or min(256, max(8, 2**14 // num_envs))  # <= ~16k pooled states per agent
        self.generators = [torch.Generator(device=self.device).manual_seed(int(s)) for s in seeds]
        self._reset_low = self._const(self.reset_low)
        self._reset_range = self._const(self.reset_high) - self._reset_low
        # flat pool row of env (k, n)'s first pooled state
        self._pool_base = torch.arange(num_agents * num_envs, device=self.device).view(num_agents, num_envs)
        self._pool_base *= self.pool_size
        self._action_shape = (num_agents, num_envs) if self.discrete else (num_agents, num_envs, self.action_dim)
        # 0-dim operands: a Python number costs a scalar-tensor wrap (~1 µs on CPU) in every op it meets
        self._one, self._zero = torch.ones((), dtype=torch.int64, device=self.device), self._pool_base.new_zeros(())
        self._max_steps = torch.full((), self.max_episode_steps, dtype=torch.int64, device=self.device)
        self._look_on_host = self.device.type == "cpu"  # on a GPU a look at `done` would be a host sync per step
        self.state: Tensor | None = None  # (K, N, state_dim)
        self.elapsed = torch.zeros(num_agents, num_envs, dtype=torch.int64, device=self.device)

    def _const(self, value: float | Sequence[float], dtype: torch.dtype | None = None) -> Tensor:
        return torch.tensor(value, dtype=dtype or self.dtype, device=self.device)

    # ---- per-task hooks -------------------------------------------------------------------------------------
    def _transition(self, state: Tensor, action: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """One gymnasium `step` on every env.

        Args:
            state: `(K, N, state_dim)` physical state.
            action: `(K, N)` int64 or `(K, N, action_dim)` float.

        Returns:
            next_state `(K, N, state_dim)`, reward `(K, N)` float32, terminated `(K, N)` bool.
        """
        raise NotImplementedError

    def _get_obs(self, state: Tensor) -> Tensor:
        """`(..., state_dim)` state -> `(..., obs_dim)` float32 observation (gymnasium's `_get_obs`)."""
        return state.to(torch.float32, copy=True)  # a copy: the caller may edit obs in place, never env.state

    # ---- batch mechanics ------------------------------------------------------------------------------------
    def _refill_pool(self) -> None:
        shape = (self.num_envs, self.pool_size, self.state_dim)
        u = torch.stack([torch.rand(shape, generator=g, device=self.device, dtype=self.dtype)
                         for g in self.generators])  # (K, N, P, state_dim), like np_random.uniform(low, high)
        self._pool = torch.addcmul(self._reset_low, u, self._reset_range).view(-1, self.state_dim)
        self._cursor = self._pool_base.clone()  # (K, N) flat pool row of each env's next unused reset state
        self._pool_age = 0  # steps since the refill; each step uses at most one pooled state per env

    def reset(self) -> Tensor:
        """Reset every env from its agent's generator (no reseeding).

        Returns:
            obs `(K, N, obs_dim)` float32.
        """
        self._refill_pool()
        self.state = self._pool[self._cursor]
        self._cursor = self._cursor + self._one
        self._pool_age = 1
        self.elapsed = torch.zeros_like(self.elapsed)
        return self._get_obs(self.state)

    def step(self, action: Tensor) -> EnvStep:
        """Step all K x N envs; envs that end are reset in the same call (SAME_STEP auto-reset).

        Args:
            action: `(K, N)` int64 (discrete) or `(K, N, action_dim)` float (continuous, clipped to the bounds).

        Returns:
            EnvStep of `(K, N, ...)` tensors. Unlike gymnasium's TimeLimit, which also sets truncated when the
            last allowed step terminates, `truncated` is only set where the env did not terminate.
        """
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        if action.shape != self._action_shape or (self.discrete and action.dtype != torch.int64):
            raise ValueError(f"{self.env_id}: action {action.dtype} {tuple(action.shape)}, expected shape "
                             f"{self._action_shape}" + (" int64" if self.discrete else ""))
        if self._pool_age == self.pool_size:
            self._refill_pool()
        self._pool_age += 1
        next_state, reward, terminated = self._transition(self.state, action)
        elapsed = self.elapsed + self._one
        done = terminated | (elapsed >= self._max_steps)
        truncated = done ^ terminated  # time limit reached and not terminated
        if self._look_on_host and not bool(done.any()):
            # no episode ends, as on most steps: on the CPU one look costs less than the reset ops it skips
            self.state, self.elapsed = next_state, elapsed
        else:
            self.state = torch.where(done.unsqueeze(-1), self._pool[self._cursor], next_state)
            self._cursor = self._cursor + done
            self.elapsed = torch.where(done, self._zero, elapsed)
        if self.obs_is_state:
            obs = self._get_obs(self.state)
            # where nothing was reset the final observation is the observation (a copy: never env.state itself)
            final_obs = obs if self.state is next_state else next_state.to(torch.float32)
        else:  # one pass of the trig over both (post-reset, true next) states
            obs, final_obs = self._get_obs(torch.stack((self.state, next_state))).unbind(0)
        return EnvStep(obs, reward, terminated, truncated, final_obs)

    def set_state(self, state: Tensor, elapsed: Tensor | None = None) -> None:
        """Overwrite the physical state (and step counters, default 0) of every env.

        Args:
            state: `(K, N, state_dim)`, cast to the env's device and dtype.
            elapsed: `(K, N)` steps since reset, or None for zeros.
        """
        shape = (self.num_agents, self.num_envs)
        if tuple(state.shape) != (*shape, self.state_dim):
            raise ValueError(f"state shape {tuple(state.shape)} != {(*shape, self.state_dim)}")
        if self.state is None:
            self._refill_pool()
        self.state = state.to(self.device, self.dtype).clone()
        self.elapsed = (torch.zeros(shape, dtype=torch.int64, device=self.device) if elapsed is None
                        else elapsed.to(self.device, torch.int64).expand(shape).clone())

    def close(self) -> None:
        """Nothing to release (gymnasium's envs hold processes or renderers; these hold tensors)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.env_id}, K={self.num_agents}, N={self.num_envs}, {self.device})"


class CartPole(TorchClassicEnv):
    """`CartPoleEnv` with the default euler integrator and reward +1 on every step, the terminating one included."""

    env_id, obs_dim, state_dim, discrete, num_actions, max_episode_steps = "CartPole-v1", 4, 4, True, 2, 500
    reset_low, reset_high = (-0.05,) * 4, (0.05,) * 4
    obs_is_state = True
    gravity = 9.8
    masscart = 1.0
    masspole = 0.1
    total_mass = masspole + masscart
    length = 0.5  # actually half the pole's length
    polemass_length = masspole * length
    force_mag = 10.0
    tau = 0.02  # seconds between state updates
    theta_threshold_radians = 12 * 2 * math.pi / 360
    x_threshold = 2.4

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # temp = (force + pml * theta_dot^2 sin) / total_mass: the force table is pre-divided by total_mass
        self._force_tm = self._const([-self.force_mag / self.total_mass, self.force_mag / self.total_mass])
        self._gravity = self._const(self.gravity)
        self._four_thirds_l = self._const(4.0 / 3.0 * self.length)
        # |x| > x_threshold or |theta| > theta_threshold; velocities never terminate
        self._thresholds = self._const([self.x_threshold, math.inf, self.theta_threshold_radians, math.inf])
        self._unit_reward = torch.ones(self.num_agents, self.num_envs, device=self.device)  # shared, never written

    def _transition(self, state: Tensor, action: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        _, x_dot, theta, theta_dot = state.unbind(-1)
        costheta, sintheta = theta.cos(), theta.sin()
        temp = torch.addcmul(self._force_tm.take(action), theta_dot * theta_dot, sintheta,
                             value=self.polemass_length / self.total_mass)
        # (g sin - cos temp) / (l (4/3 - mp cos^2 / total_mass))
        thetaacc = torch.addcmul(sintheta * self._gravity, costheta, temp, value=-1.0) / torch.addcmul(
            self._four_thirds_l, costheta, costheta, value=-self.length * self.masspole / self.total_mass)
        xacc = torch.addcmul(temp, thetaacc, costheta, value=-self.polemass_length / self.total_mass)
        # euler: every component moves along the derivative taken at the old state
        next_state = torch.add(state, torch.stack((x_dot, xacc, theta_dot, thetaacc), -1), alpha=self.tau)
        terminated = (next_state.abs() > self._thresholds).any(-1)
        return next_state, self._unit_reward, terminated


class Acrobot(TorchClassicEnv):
    """`AcrobotEnv` with "book" dynamics, one `rk4` step of dt=0.2, angles wrapped and velocities bounded.

    The step is computed in float64 whatever the env dtype, as gymnasium does: at |dθ2| near 9pi the terms of
    ddθ2 (~400) cancel, and float32 rounding alone moves the next velocity by up to ~5e-4.
    """

    env_id, obs_dim, state_dim, discrete, num_actions, max_episode_steps = "Acrobot-v1", 6, 4, True, 3, 500
    reset_low, reset_high = (-0.1,) * 4, (0.1,) * 4
    dt = 0.2
    LINK_LENGTH_1 = 1.0
    LINK_MASS_1 = 1.0
    LINK_MASS_2 = 1.0
    LINK_COM_POS_1 = 0.5
    LINK_COM_POS_2 = 0.5
    LINK_MOI = 1.0
    MAX_VEL_1 = 4 * math.pi
    MAX_VEL_2 = 9 * math.pi
    g = 9.8

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        c = lambda v: self._const(v, torch.float64)  # noqa: E731
        self._avail_torque = c([-1.0, 0.0, 1.0])  # AVAIL_TORQUE
        m1, m2, l1, lc1, lc2 = (self.LINK_MASS_1, self.LINK_MASS_2, self.LINK_LENGTH_1, self.LINK_COM_POS_1,
                                self.LINK_COM_POS_2)
        I1 = I2 = self.LINK_MOI
        # _dsdt's terms regrouped as constant + coefficient * (trig term), one fused op each
        self._neg_d1_const = c(-(m1 * lc1**2 + m2 * (l1**2 + lc2**2) + I1 + I2))
        self._d1_cos = 2 * m2 * l1 * lc2
        self._d2_const = c(m2 * lc2**2 + I2)
        self._d2_cos = m2 * l1 * lc2
        self._phi2_coef = c(m2 * lc2 * self.g)
        self._phi1_coef = (m1 * lc1 + m2 * l1) * self.g
        self._coriolis = m2 * l1 * lc2
        # wrap(angle, -pi, pi) as angle - 2pi round(angle / 2pi) on the angle columns, then bound the velocities
        self._inv_period = c([1 / (2 * math.pi)] * 2 + [0.0] * 2)
        self._period = c([2 * math.pi] * 2 + [0.0] * 2)
        self._state_high = c([math.inf, math.inf, self.MAX_VEL_1, self.MAX_VEL_2])
        # observation [cos s0, sin s0, cos s1, sin s1, s2, s3] as one gather + two selects
        self._obs_columns = torch.tensor([0, 0, 1, 1, 2, 3], device=self.device)
        self._obs_cos = torch.tensor([True, False, True, False, False, False], device=self.device)
        self._obs_sin = torch.tensor([False, True, False, True, False, False], device=self.device)

    def _dsdt(self, s: Tensor, a: Tensor) -> Tensor:
        """`AcrobotEnv._dsdt` ("book"): `(K, N, 4)` state, `(K, N)` torque -> `(K, N, 4)` time derivative."""
        theta1, theta2, dtheta1, dtheta2 = s.unbind(-1)
        cos2, sin2 = theta2.cos(), theta2.sin()
        neg_d1 = torch.add(self._neg_d1_const, cos2, alpha=-self._d1_cos)
        d2 = torch.add(self._d2_const, cos2, alpha=self._d2_cos)
        phi2 = (theta1 + theta2).sin() * self._phi2_coef  # cos(x - pi/2) == sin(x)
        # -c dθ2² sinθ2 - 2c dθ2 dθ1 sinθ2 == -c sinθ2 dθ2 (dθ2 + 2 dθ1)
        phi1 = torch.addcmul(torch.add(phi2, theta1.sin(), alpha=self._phi1_coef),
                             sin2 * dtheta2, torch.add(dtheta2, dtheta1, alpha=2.0), value=-self._coriolis)
        neg_ratio = d2 / neg_d1  # -d2 / d1
        num = torch.addcmul(torch.addcmul(a - phi2, neg_ratio, phi1, value=-1.0), dtheta1 * dtheta1, sin2,
                            value=-self._coriolis)
        ddtheta2 = num / torch.addcmul(self._d2_const, neg_ratio, d2)  # / (m2 lc2² + I2 - d2² / d1)
        ddtheta1 = torch.addcmul(phi1, d2, ddtheta2) / neg_d1
        return torch.stack((dtheta1, dtheta2, ddtheta1, ddtheta2), -1)

    def _transition(self, state: Tensor, action: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        state, torque = state.double(), self._avail_torque.take(action)
        # rk4(self._dsdt, s, [0, dt]): a single classic Runge-Kutta step
        k1 = self._dsdt(state, torque)
        k2 = self._dsdt(torch.add(state, k1, alpha=self.dt / 2), torque)
        k3 = self._dsdt(torch.add(state, k2, alpha=self.dt / 2), torque)
        k4 = self._dsdt(torch.add(state, k3, alpha=self.dt), torque)
        ns = torch.add(state, torch.add(k1 + k4, k2 + k3, alpha=2.0), alpha=self.dt / 6.0)
        # wrap() subtracts 2pi until x <= pi (adds until x >= -pi): as many times as round(x / 2pi) says, except
        # at exactly +-3pi, +-5pi, ... (gymnasium keeps +-pi there, this gives -+pi)
        ns = torch.addcmul(ns, torch.round(ns * self._inv_period), self._period, value=-1.0)
        next_state = torch.clamp(ns, -self._state_high, self._state_high)  # bound() the velocities
        # _terminal: -cos(s0) - cos(s0 + s1) > 1
        terminated = next_state[..., :2].cumsum(-1).cos().sum(-1) < -1.0
        return next_state.to(self.dtype), terminated.to(torch.float32) - 1.0, terminated

    def _get_obs(self, state: Tensor) -> Tensor:
        s = state.index_select(-1, self._obs_columns)  # s0, s0, s1, s1, s2, s3
        return torch.where(self._obs_cos, s.cos(), torch.where(self._obs_sin, s.sin(), s)).to(torch.float32)


class MountainCar(TorchClassicEnv):
    """`MountainCarEnv` (discrete, goal_velocity=0), reward -1 on every step."""

    env_id, obs_dim, state_dim, discrete, num_actions, max_episode_steps = "MountainCar-v0", 2, 2, True, 3, 200
    reset_low, reset_high = (-0.6, 0.0), (-0.4, 0.0)
    obs_is_state = True
    min_position = -1.2
    max_position = 0.6
    max_speed = 0.07
    goal_position = 0.5
    goal_velocity = 0.0
    force = 0.001
    gravity = 0.0025

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._force = self._const([-self.force, 0.0, self.force])  # (action - 1) * force

    def _transition(self, state: Tensor, action: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        position, velocity = state.unbind(-1)
        velocity = torch.add(velocity + self._force.take(action), (3 * position).cos(), alpha=-self.gravity)
        velocity = velocity.clamp(-self.max_speed, self.max_speed)
        position = (position + velocity).clamp(self.min_position, self.max_position)
        # the car stops dead against the left wall
        velocity = velocity.masked_fill((position <= self.min_position) & (velocity < 0), 0.0)
        terminated = (position >= self.goal_position) & (velocity >= self.goal_velocity)
        return torch.stack((position, velocity), -1), torch.full_like(position, -1.0, dtype=torch.float32), terminated


class Pendulum(TorchClassicEnv):
    """`PendulumEnv` (g=10): reward -(angle_normalize(th)^2 + 0.1 thdot^2 + 0.001 u^2) on the pre-step state."""

    env_id, obs_dim, state_dim, discrete, action_dim, max_episode_steps = "Pendulum-v1", 3, 2, False, 1, 200
    reset_low, reset_high = (-math.pi, -1.0), (math.pi, 1.0)
    max_speed = 8.0
    max_torque = 2.0
    dt = 0.05
    g = 10.0
    m = 1.0
    l = 1.0  # noqa: E741 (gymnasium's name)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.action_low = torch.full((1,), -self.max_torque, dtype=torch.float32, device=self.device)
        self.action_high = torch.full((1,), self.max_torque, dtype=torch.float32, device=self.device)

    def _transition(self, state: Tensor, action: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        th, thdot = state.unbind(-1)
        u = action[..., 0].to(self.dtype).clamp(-self.max_torque, self.max_torque)
        th_norm = torch.remainder(th + math.pi, 2 * math.pi) - math.pi  # angle_normalize
        costs = torch.addcmul(torch.addcmul(th_norm.square(), thdot, thdot, value=0.1), u, u, value=0.001)
        newthdot = torch.add(thdot, th.sin(), alpha=3 * self.g / (2 * self.l) * self.dt)
        newthdot = torch.add(newthdot, u, alpha=3.0 / (self.m * self.l**2) * self.dt)
        newthdot = newthdot.clamp(-self.max_speed, self.max_speed)
        newth = torch.add(th, newthdot, alpha=self.dt)
        reward = -costs.to(torch.float32)
        return torch.stack((newth, newthdot), -1), reward, torch.zeros_like(reward, dtype=torch.bool)

    def _get_obs(self, state: Tensor) -> Tensor:
        th, thdot = state.unbind(-1)
        return torch.stack((th.cos(), th.sin(), thdot), -1).to(torch.float32)


TORCH_ENVS: dict[str, type[TorchClassicEnv]] = {cls.env_id: cls for cls in (CartPole, Acrobot, MountainCar, Pendulum)}


def uses_torch_port(backend: str, env_id: str) -> bool:
    """Whether `env.backend` steps `env_id` with a port here: always for `torch`, for `auto` where one exists."""
    return backend == "torch" or (backend == "auto" and env_id in TORCH_ENVS)


def make_torch_env(env_id: str, num_agents: int, num_envs: int, seeds: Sequence[int],
                   device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32) -> TorchClassicEnv:
    """Build `num_agents` x `num_envs` envs of `env_id` on `device`, agent k seeded with `seeds[k]`."""
    if env_id not in TORCH_ENVS:
        raise ValueError(f"unknown env_id {env_id!r}; known: {sorted(TORCH_ENVS)}")
    return TORCH_ENVS[env_id](num_agents, num_envs, seeds, device=device, dtype=dtype)
