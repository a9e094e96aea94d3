"""Tests for playground/envs/shaping.py: observation scaling, MountainCar's energy potential, and the shaped reward
in a gym task's batch (the score stays the env's)."""

from __future__ import annotations

import math

import pytest
import torch

from playground.config import compose, validate
from playground.envs.shaping import POTENTIALS, ScaledObs, mountaincar_energy, progress_shaping
from playground.envs.torch_classic import make_torch_env
from playground.tasks.gym_task import GymTask
from playground.train import build_task_for


def test_scaled_obs_maps_finite_bounds_to_unit_range_and_leaves_infinite_ones():
    car = ScaledObs(make_torch_env("MountainCar-v0", 1, 2, [0]), "MountainCar-v0")
    corners = torch.tensor([[-1.2, -0.07], [0.6, 0.07], [-0.3, 0.0]])
    assert torch.allclose(car.scale(corners), torch.tensor([[-1.0, -1.0], [1.0, 1.0], [0.0, 0.0]]), atol=1e-6)
    assert torch.allclose(car.unscale(car.scale(corners)), corners, atol=1e-6)
    pole = ScaledObs(make_torch_env("CartPole-v1", 1, 2, [0]), "CartPole-v1")
    state = torch.tensor([[4.8, 123.0, -0.41887903, -55.0]])  # velocities: infinite bounds, unchanged
    assert torch.allclose(pole.scale(state), torch.tensor([[1.0, 123.0, -1.0, -55.0]]), atol=1e-5)


def test_scaled_env_steps_the_same_env_with_scaled_observations():
    raw, scaled = (make_torch_env("MountainCar-v0", 1, 4, [7]) for _ in range(2))
    scaled = ScaledObs(scaled, "MountainCar-v0")
    assert torch.allclose(scaled.reset(), scaled.scale(raw.reset()))
    action = torch.tensor([[0, 1, 2, 2]])
    a, b = raw.step(action), scaled.step(action)
    assert torch.equal(a.reward, b.reward) and torch.equal(a.terminated, b.terminated)
    assert torch.allclose(b.obs, scaled.scale(a.obs)) and torch.allclose(b.final_obs, scaled.scale(a.final_obs))
    assert scaled.discrete and scaled.num_actions == 3  # everything else is the env's own


def test_mountaincar_energy_is_0_at_rest_in_the_valley_and_1_at_rest_on_the_goal():
    states = torch.tensor([[-math.pi / 6, 0.0], [0.5, 0.0], [-math.pi / 6, 0.07]])
    energy = mountaincar_energy(states)
    assert energy[0].item() == pytest.approx(0.0, abs=1e-6) and energy[1].item() == pytest.approx(1.0, abs=1e-6)
    # by hand: v^2/2 = 0.00245 over the range 0.0025/3 * (sin(1.5) + 1)
    assert energy[2].item() == pytest.approx(0.00245 / (0.0025 / 3 * (math.sin(1.5) + 1)), rel=1e-5)


def test_shaping_telescopes_to_the_potential_gained_over_an_episode():
    """With gamma = 1 the shaped terms of a trajectory sum to scale * (phi(last) - phi(first)): shaping adds no
    return a policy could farm by going round in circles (Ng et al. 1999)."""
    shaping = progress_shaping("mountaincar_energy", gamma=1.0)
    path = torch.stack([torch.linspace(-0.5, 0.3, 9), torch.linspace(0.0, 0.05, 9)], -1)
    total = shaping(path[:-1], path[1:]).sum()
    _, scale = POTENTIALS["mountaincar_energy"]
    expected = scale * (mountaincar_energy(path[-1]) - mountaincar_energy(path[0]))
    assert total.item() == pytest.approx(expected.item(), rel=1e-5)
    with pytest.raises(ValueError, match="task.progress='height' is out of range"):
        progress_shaping("height", gamma=0.99)


def _batch(*overrides: str):
    cfg = compose(["task=mountaincar", "env.num_envs=4", "env.rollout_length=8", *overrides,
                   "actor_rollout_ref.actor.ppo_mini_batch_size=32", "critic.ppo_mini_batch_size=32"])
    validate(cfg)
    task = build_task_for([cfg], torch.device("cpu"))
    assert isinstance(task, GymTask)
    return task, task.generate()


def test_partial_credit_shapes_the_trained_reward_and_never_the_score():
    _, plain = _batch()
    task, shaped = _batch("reward.partial_credit=true", "env.normalize_obs=true")
    assert torch.equal(shaped["scores"], plain["scores"]) and bool((shaped["scores"] == -1).all())
    raw_obs, raw_next = task.env.unscale(shaped["obs"]), task.env.unscale(shaped["final_obs"])
    expected = -1 + progress_shaping("mountaincar_energy", 0.99)(raw_obs, raw_next)
    assert torch.allclose(shaped["token_level_scores"].squeeze(-1), expected, atol=1e-5)
    assert shaped["obs"].abs().max() <= 1.0 + 1e-6  # scaled: the car stays inside the bounds
    assert torch.equal(plain["token_level_scores"], plain["scores"])
