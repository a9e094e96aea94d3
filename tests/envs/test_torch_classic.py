"""Tests for playground/envs/torch_classic.py: each port against gymnasium 1.4 from the same states and actions."""

from __future__ import annotations

import math

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium.wrappers import TimeLimit

from playground.envs.torch_classic import TORCH_ENVS, EnvStep, TorchClassicEnv, make_torch_env

ENV_IDS = list(TORCH_ENVS)
TOL = {torch.float32: 1e-5, torch.float64: 1e-7}  # float64: gymnasium's Pendulum itself rounds u to float32
DEVICES = ["cpu"] + ([pytest.param("cuda", marks=pytest.mark.gpu)] if torch.cuda.is_available() else [])


def _sample_states(env_id: str, m: int, seed: int = 0) -> np.ndarray:
    """`(m, state_dim)` states: broad ones, some past the termination thresholds, some on or near the bounds."""
    rng = np.random.default_rng(seed)
    u = lambda lo, hi: rng.uniform(lo, hi, m)  # noqa: E731
    if env_id == "CartPole-v1":
        s = np.stack([u(-3, 3), u(-3, 3), u(-0.35, 0.35), u(-3, 3)], 1)
        edge = np.arange(m) % 4 == 0  # straddle |x| = 2.4 and |theta| = 12 degrees
        s[edge, 0] = rng.choice([-2.4, 2.4], edge.sum()) + rng.uniform(-0.02, 0.02, edge.sum())
        s[edge, 2] = rng.choice([-0.2094, 0.2094], edge.sum()) + rng.uniform(-0.005, 0.005, edge.sum())
        s[1::4] = rng.uniform(-0.05, 0.05, s[1::4].shape)  # the reset region
    elif env_id == "Acrobot-v1":
        vmax = np.array([4 * math.pi, 9 * math.pi])
        s = np.concatenate([rng.uniform(-math.pi, math.pi, (m, 2)), rng.uniform(-1.1, 1.1, (m, 2)) * vmax], 1)
        s[::5, :2] = rng.uniform(-4.0, 4.0, (len(s[::5]), 2))  # angles gymnasium never stores: wrap() them
        s[1::5, 2:] = vmax * rng.choice([-1, 1], (len(s[1::5]), 2))  # velocities on the bound
    elif env_id == "MountainCar-v0":
        s = np.stack([u(-1.2, 0.6), u(-0.07, 0.07)], 1)
        s[::4] = np.stack([u(-1.2, -1.1), u(-0.07, 0.0)], 1)[::4]  # against the left wall
        s[::8, 0] = -1.2
        s[1::4] = np.stack([u(0.4, 0.6), u(-0.01, 0.07)], 1)[1::4]  # around the goal
    else:
        s = np.stack([u(-3 * math.pi, 3 * math.pi), u(-10, 10)], 1)  # unnormalised angles, |thdot| past 8
    return s.astype(np.float32).astype(np.float64)  # representable in both dtypes


def _sample_actions(env: TorchClassicEnv, m: int, seed: int = 0) -> list[np.ndarray]:
    """Every discrete action, or random continuous ones (out of bounds included) plus the edges."""
    if env.discrete:
        return [np.full(m, a) for a in range(env.num_actions)]
    rng = np.random.default_rng(seed)
    fixed = np.resize([-10.0, -2.0, 0.0, 2.0, 10.0], m)
    return [rng.uniform(-3, 3, (m, 1)).astype(np.float32), fixed.astype(np.float32)[:, None]]


def _gym_step(env_id: str, states: np.ndarray, actions: np.ndarray, elapsed: int = 0):
    """gymnasium.make(env_id) stepped once from each state; returns next states, obs, rewards, terminated, truncated."""
    env = gymnasium.make(env_id, disable_env_checker=True)
    env.reset(seed=0)
    limit = env
    while not isinstance(limit, TimeLimit):
        limit = limit.env
    out = []
    for s, a in zip(states, actions, strict=True):
        env.unwrapped.state = s.copy()
        env.unwrapped.steps_beyond_terminated = None  # CartPole: a fresh episode
        limit._elapsed_steps = elapsed
        obs, reward, terminated, truncated, _ = env.step(a if a.ndim else int(a))
        out.append((np.asarray(env.unwrapped.state, dtype=np.float64), obs, reward, terminated, truncated))
    return [np.array(col) for col in zip(*out, strict=True)]


def _torch_step(env: TorchClassicEnv, states: np.ndarray, actions: np.ndarray, elapsed: int = 0) -> EnvStep:
    k, n = env.num_agents, env.num_envs
    env.set_state(torch.from_numpy(states).view(k, n, -1), torch.full((k, n), elapsed))
    return env.step(torch.from_numpy(actions).view(env._action_shape).to(env.device))


def _flat(x: torch.Tensor) -> np.ndarray:
    return x.flatten(0, 1).cpu().double().numpy()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_transitions_match_gymnasium(env_id, dtype, device):
    m = 256
    env = make_torch_env(env_id, 2, m // 2, seeds=[0, 1], device=device, dtype=dtype)
    states, tol = _sample_states(env_id, m), TOL[dtype]
    for actions in _sample_actions(env, m):
        g_state, g_obs, g_reward, g_term, g_trunc = _gym_step(env_id, states, actions)
        out = _torch_step(env, states, actions)
        done = _flat(out.terminated | out.truncated).astype(bool)
        np.testing.assert_array_equal(_flat(out.terminated), g_term)
        assert not g_trunc.any() and not out.truncated.any()
        np.testing.assert_allclose(_flat(out.reward), g_reward, rtol=1e-6, atol=tol)
        np.testing.assert_allclose(_flat(out.final_obs), g_obs, rtol=1e-6, atol=tol)
        # where the episode goes on, the state kept is the true next state at full precision
        np.testing.assert_allclose(_flat(env.state)[~done], g_state[~done], rtol=0, atol=tol)
        assert env.state.dtype == dtype


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_truncation_matches_time_limit(env_id):
    m = 128
    env = make_torch_env(env_id, 2, m // 2, seeds=[0, 1])
    states, actions = _sample_states(env_id, m, seed=1), _sample_actions(env, m, seed=1)[0]
    for elapsed in (env.max_episode_steps - 2, env.max_episode_steps - 1):
        _, _, _, g_term, g_trunc = _gym_step(env_id, states, actions, elapsed)
        out = _torch_step(env, states, actions, elapsed)
        assert (g_trunc == (elapsed == env.max_episode_steps - 1)).all()
        assert g_term.any() or env_id == "Pendulum-v1"  # some envs terminate on the last allowed step
        np.testing.assert_array_equal(_flat(out.terminated), g_term)
        # gymnasium's TimeLimit also flags truncated on a terminating last step; the port reports it as terminated
        np.testing.assert_array_equal(_flat(out.truncated), g_trunc & ~g_term)
        done = out.terminated | out.truncated
        assert torch.equal(env.elapsed, torch.where(done, 0, elapsed + 1))


CONSTANTS = {
    "CartPole-v1": ["gravity", "masscart", "masspole", "total_mass", "length", "polemass_length", "force_mag", "tau",
                    "theta_threshold_radians", "x_threshold"],
    "Acrobot-v1": ["dt", "LINK_LENGTH_1", "LINK_MASS_1", "LINK_MASS_2", "LINK_COM_POS_1", "LINK_COM_POS_2",
                   "LINK_MOI", "MAX_VEL_1", "MAX_VEL_2"],
    "MountainCar-v0": ["min_position", "max_position", "max_speed", "goal_position", "goal_velocity", "force",
                       "gravity"],
    "Pendulum-v1": ["max_speed", "max_torque", "dt", "g", "m", "l"],
}


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_constants_are_gymnasiums(env_id):
    genv = gymnasium.make(env_id).unwrapped
    for name in CONSTANTS[env_id]:
        assert getattr(TORCH_ENVS[env_id], name) == getattr(genv, name), name
    # the variants ported: euler, "book" dynamics without torque noise, 3 torques
    assert getattr(genv, "kinematics_integrator", "euler") == "euler"
    assert getattr(genv, "book_or_nips", "book") == "book" and getattr(genv, "torque_noise_max", 0.0) == 0.0
    assert getattr(genv, "AVAIL_TORQUE", [-1.0, 0.0, 1.0]) == [-1.0, 0.0, 1.0]


def test_registered_time_limits_and_spaces():
    for env_id, cls in TORCH_ENVS.items():
        genv = gymnasium.make(env_id)
        assert cls.max_episode_steps == genv.spec.max_episode_steps
        assert (cls.obs_dim,) == genv.observation_space.shape
        if cls.discrete:
            assert cls.num_actions == genv.action_space.n
        else:
            env = make_torch_env(env_id, 1, 1, seeds=[0])
            assert (cls.action_dim,) == genv.action_space.shape
            np.testing.assert_array_equal(env.action_low.numpy(), genv.action_space.low)
            np.testing.assert_array_equal(env.action_high.numpy(), genv.action_space.high)


def test_hand_computed_transitions():
    cart = make_torch_env("CartPole-v1", 1, 1, seeds=[0], dtype=torch.float64)
    cart.set_state(torch.zeros(1, 1, 4))
    out = cart.step(torch.ones(1, 1, dtype=torch.int64))  # push right from rest
    temp = 10 / 1.1
    thetaacc = -temp / (0.5 * (4 / 3 - 0.1 / 1.1))
    xacc = temp - 0.05 * thetaacc / 1.1
    np.testing.assert_allclose(cart.state[0, 0].numpy(), [0.0, 0.02 * xacc, 0.0, 0.02 * thetaacc], atol=1e-12)
    assert out.reward.item() == 1.0 and not out.terminated.item()

    car = make_torch_env("MountainCar-v0", 1, 1, seeds=[0], dtype=torch.float64)
    car.set_state(torch.zeros(1, 1, 2))
    car.step(torch.full((1, 1), 2))  # velocity = 0.001 - 0.0025 cos(0)
    np.testing.assert_allclose(car.state[0, 0].numpy(), [-0.0015, -0.0015], atol=1e-12)
    car.set_state(torch.tensor([[[-1.2, -0.05]]]))
    car.step(torch.zeros(1, 1, dtype=torch.int64))  # pinned against the wall: stopped dead
    np.testing.assert_array_equal(car.state[0, 0].numpy(), [-1.2, 0.0])

    pend = make_torch_env("Pendulum-v1", 1, 1, seeds=[0], dtype=torch.float64)
    pend.set_state(torch.tensor([[[2 * math.pi, 0.0]]], dtype=torch.float64))
    out = pend.step(torch.full((1, 1, 1), 5.0))  # clipped to 2; angle_normalize(2pi) == 0
    assert out.reward.item() == pytest.approx(-0.001 * 4)
    np.testing.assert_allclose(pend.state[0, 0].numpy(), [2 * math.pi + 0.015, 0.3], atol=1e-12)

    acro = make_torch_env("Acrobot-v1", 1, 1, seeds=[0], dtype=torch.float64)
    acro.set_state(torch.zeros(1, 1, 4))  # hanging at rest, no torque: stays put
    out = acro.step(torch.ones(1, 1, dtype=torch.int64))
    assert torch.equal(acro.state, torch.zeros(1, 1, 4, dtype=torch.float64)) and out.reward.item() == -1.0
    np.testing.assert_array_equal(out.obs[0, 0].numpy(), [1, 0, 1, 0, 0, 0])
    # both links straight up: -cos(pi) - cos(pi + 0) = 2 > 1
    acro.set_state(torch.tensor([[[math.pi, 0.0, 0.0, 0.0]]], dtype=torch.float64))
    out = acro.step(torch.ones(1, 1, dtype=torch.int64))
    assert out.terminated.item() and out.reward.item() == 0.0


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_autoreset_same_step(env_id):
    n = 64
    env = make_torch_env(env_id, 2, n, seeds=[3, 4])
    states = torch.from_numpy(_sample_states(env_id, 2 * n, seed=2)).view(2, n, -1)
    actions = torch.from_numpy(_sample_actions(env, 2 * n, seed=2)[0]).view(env._action_shape)
    elapsed = torch.zeros(2, n, dtype=torch.int64)
    elapsed[:, ::3] = env.max_episode_steps - 1  # every third env hits the time limit
    env.set_state(states, elapsed)
    out = env.step(actions)
    done = out.terminated | out.truncated
    assert done[:, ::3].all() and not done.all()
    g_state, g_obs, *_ = _gym_step(env_id, states.flatten(0, 1).numpy(), actions.flatten(0, 1).numpy())
    np.testing.assert_allclose(_flat(out.final_obs), g_obs, rtol=1e-6, atol=1e-5)
    assert torch.equal(out.obs[~done], out.final_obs[~done])
    low, high = torch.tensor(env.reset_low), torch.tensor(env.reset_high)
    reset_states = env.state[done]
    assert ((reset_states >= low) & (reset_states <= high)).all()
    assert torch.equal(out.obs[done], env._get_obs(reset_states))
    assert (env.elapsed[done] == 0).all() and (env.elapsed[~done] == elapsed[~done] + 1).all()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_reset_distribution_matches_gymnasium_ranges(env_id):
    env = make_torch_env(env_id, 2, 1024, seeds=[0, 1])
    obs = env.reset()
    low, high = torch.tensor(env.reset_low), torch.tensor(env.reset_high)
    s = env.state.flatten(0, 1)
    assert ((s >= low) & (s <= high)).all()
    width = (high - low).clamp(min=1e-12)
    assert ((s.amin(0) - low) / width < 0.01).all() and ((high - s.amax(0)) / width < 0.01).all()  # fills the box
    np.testing.assert_allclose(s.mean(0).numpy(), ((low + high) / 2).numpy(), atol=0.05 * width.max().item())
    assert torch.equal(obs, env._get_obs(env.state)) and (env.elapsed == 0).all()
    genv = gymnasium.make(env_id)
    g = np.array([(genv.reset(seed=i), genv.unwrapped.state)[1] for i in range(200)], dtype=np.float64)  # (200, S)
    low, high, width = low.double().numpy(), high.double().numpy(), width.double().numpy()
    assert (g >= low).all() and (g <= high).all()  # gymnasium's resets fill the same box
    assert (g.min(0) - low < 0.05 * width + 1e-12).all() and (high - g.max(0) < 0.05 * width + 1e-12).all()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_agent_independent_of_other_agents(env_id):
    """Agent 3 of a K=5 batch == a K=1 env seeded seeds[3], bit for bit, whatever the other agents do."""
    n, steps, seeds = 16, 450, [10, 11, 12, 13, 14]
    big = make_torch_env(env_id, 5, n, seeds=seeds)
    solo = make_torch_env(env_id, 1, n, seeds=seeds[3:4])
    assert torch.equal(big.reset()[3:4], solo.reset())
    gen, resets = torch.Generator().manual_seed(0), 0
    elapsed = torch.randint(big.max_episode_steps, (5, n), generator=gen)  # staggered time limits
    big.set_state(big.state, elapsed)
    solo.set_state(solo.state, elapsed[3:4])
    for t in range(steps):  # crosses a pool refill (pool_size 256) and resets
        if big.discrete:
            act = torch.randint(big.num_actions, (5, n), generator=gen)
        else:
            act = torch.rand((5, n, 1), generator=gen) * 6 - 3
        a, b = big.step(act), solo.step(act[3:4])
        for x, y in zip(a, b, strict=True):
            assert (x is None and y is None) or torch.equal(x[3:4], y), t
        assert torch.equal(big.state[3:4], solo.state) and torch.equal(big.elapsed[3:4], solo.elapsed)
        resets += (b.terminated | b.truncated).sum().item()
    assert resets >= n // 2


def test_pool_refill_keeps_resets_fresh():
    env = TORCH_ENVS["CartPole-v1"](2, 8, seeds=[0, 1], pool_size=2)
    env.reset()
    far = torch.full((2, 8, 4), 3.0)  # terminates on the next step whatever the action
    seen = []
    for _ in range(7):
        env.set_state(far)
        out = env.step(torch.zeros(2, 8, dtype=torch.int64))
        assert out.terminated.all()
        seen.append(env.state.clone())
    seen = torch.stack(seen)
    assert seen.abs().max() <= 0.05
    assert seen.flatten(0, 2).unique(dim=0).shape[0] == 7 * 16  # no pooled state handed out twice


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_shapes_and_dtypes(env_id):
    env = make_torch_env(env_id, 3, 5, seeds=[0, 1, 2], dtype=torch.float64)
    obs = env.reset()
    assert obs.shape == (3, 5, env.obs_dim) and obs.dtype == torch.float32
    assert env.state.shape == (3, 5, env.state_dim) and env.state.dtype == torch.float64
    act = torch.zeros(3, 5, dtype=torch.int64) if env.discrete else torch.zeros(3, 5, env.action_dim)
    out = env.step(act)
    assert isinstance(out, EnvStep)
    assert out.obs.shape == out.final_obs.shape == (3, 5, env.obs_dim)
    assert out.obs.dtype == out.final_obs.dtype == out.reward.dtype == torch.float32
    assert out.reward.shape == out.terminated.shape == out.truncated.shape == (3, 5)
    assert out.terminated.dtype == out.truncated.dtype == torch.bool
    assert env.elapsed.dtype == torch.int64 and (env.elapsed == 1).all()
    with pytest.raises(ValueError, match="expected shape"):
        env.step(act[..., None] if env.discrete else act[..., 0])


def test_errors():
    with pytest.raises(ValueError, match="CartPole-v1"):
        make_torch_env("CartPole-v0", 1, 1, seeds=[0])
    with pytest.raises(ValueError, match="one seed per agent"):
        make_torch_env("CartPole-v1", 2, 1, seeds=[0])
    env = make_torch_env("Pendulum-v1", 1, 1, seeds=[0])
    with pytest.raises(RuntimeError, match="reset"):
        env.step(torch.zeros(1, 1, 1))
    with pytest.raises(ValueError, match="state shape"):
        env.set_state(torch.zeros(1, 1, 3))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_step_never_syncs_with_the_host_on_cuda(env_id):
    env = TORCH_ENVS[env_id](2, 8, seeds=[0, 1], device="cuda", pool_size=4)
    env.reset()
    act = torch.ones(env._action_shape, dtype=torch.int64 if env.discrete else torch.float32, device="cuda")
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(10):  # two pool refills
            out = env.step(act)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert out.obs.device.type == "cuda" and env.state.device.type == "cuda"
