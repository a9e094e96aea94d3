import numpy as np
import torch

from playground.config import compose
from playground.envs.gym_vector import GymnasiumEnv
from playground.tasks.gym_task import GymTask
from playground.train import build_task_for


def _task(*overrides):
    cfg = compose(["task=cartpole", *overrides])
    task = build_task_for([cfg], torch.device("cpu"))
    assert isinstance(task, GymTask)
    return task


def test_next_step_autoreset_no_op_is_masked():
    env = GymnasiumEnv("CartPole-v1", 1, 2, [3])
    env.reset()
    ended_at = ended_env = None
    for t in range(200):
        step = env.step(torch.zeros(1, 2, dtype=torch.long))  # always push left: episodes end fast
        if ended_at is not None:
            assert not step.valid[0, ended_env]  # the step after an episode's end is gymnasium's no-op reset
            assert step.reward[0, ended_env] == 0.0
            break
        done = (step.terminated | step.truncated)[0]
        assert step.valid.all()
        if done.any():
            ended_at, ended_env = t, int(torch.nonzero(done)[0])
    assert ended_at is not None


def test_gymnasium_batch_masks_the_no_op_rows():
    task = _task("env.backend=gymnasium", "env.num_envs=2", "env.rollout_length=64")
    batch = task.generate()
    done = (batch["terminated"] | batch["truncated"]).reshape(2, 64)
    mask = batch["response_mask"].reshape(2, 64)
    ends = torch.nonzero(done[:, :-1])
    assert len(ends) > 0
    for env, t in ends.tolist():
        assert mask[env, t] == 1 and mask[env, t + 1] == 0


def test_bootstrap_across_truncation_not_across_termination():
    task = _task("env.backend=torch", "env.num_envs=2", "env.rollout_length=4")
    batch = task.generate()
    batch["terminated"] = torch.tensor([[False, True, False, False, False, False, False, False]])
    batch["truncated"] = torch.tensor([[False, False, False, True, False, False, False, False]])
    task.compute_values(batch)
    final_values = task.critic.values({"obs": batch["final_obs"]})
    assert batch["next_values"][0, 1, 0] == 0.0  # terminated: the next state has no value
    assert batch["next_values"][0, 3, 0] == final_values[0, 3, 0] != 0.0  # truncated: V(final observation)


def test_episode_window_counts_returns_and_lengths():
    task = _task("env.backend=torch", "env.num_envs=4", "env.rollout_length=200")
    batch = task.generate()
    batch["token_level_rewards"] = batch["token_level_scores"]
    task.record_step(batch, 1)
    metrics = task.agent_metrics(0, 1)
    window = task.windows[0]
    assert window.completed > 4
    # CartPole: return = length (reward 1 per step)
    assert np.allclose(list(window.score), list(window.length))
    assert metrics["critic/score/mean"] == np.mean(list(window.score))
    assert "episode/success_rate_cartpole" in metrics
    empty = _task("env.backend=torch", "env.num_envs=1", "env.rollout_length=2")
    assert empty.agent_metrics(0, 1) == {}  # absent until an episode ends, never NaN


def test_reward_clip_bounds_the_reward_trained_on_and_is_off_by_default():
    """reward.clip clips the reward the agent trains on (after the noise, as a reward function clips its own output);
    the task's raw reward (`scores`) stays as the env gave it."""
    plain = _task("env.backend=torch", "env.num_envs=2", "env.rollout_length=8").generate()
    assert torch.equal(plain["token_level_scores"], plain["scores"])  # CartPole: 1 a step, untouched by default
    clipped = _task("env.backend=torch", "env.num_envs=2", "env.rollout_length=8", "reward.clip=0.5").generate()
    assert torch.equal(clipped["scores"], plain["scores"])
    assert torch.equal(clipped["token_level_scores"], torch.full_like(plain["scores"], 0.5))
    noisy = _task("env.backend=torch", "env.num_envs=2", "env.rollout_length=8", "reward.noise_std=100",
                  "reward.clip=2.0").generate()["token_level_scores"]
    assert noisy.abs().max() == 2.0 and noisy.unique().numel() > 2  # the noise clipped to [-2, 2], not removed
