"""Gym tasks as the trainer sees them: rollouts of K agents × N envs turned into a verl-shaped batch.

One environment step is one "token": the batch has one row per transition (`(K, N·T, 1)`, env-major so
that a reshape gives each env's time series back for GAE). Rollouts run only the actor, with the
sampling noise of the whole rollout drawn up front; values and old log-probs are recomputed for the whole
batch in one pass afterwards (the weights do not change during a rollout, so this is the same thing).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor, nn

from playground.envs.gym_vector import GymnasiumEnv
from playground.envs.shaping import ScaledObs, progress_shaping
from playground.envs.torch_classic import TORCH_ENVS, TorchClassicEnv, make_torch_env, uses_torch_port
from playground.metric_names import EPISODE_LENGTH, EPISODE_REWARD, REWARDS, SCORE, SCORE_MEAN, SUCCESS_RATE, VAL_SCORE
from playground.models.mlp import GymActor, GymCritic, MLPWorldModel
from playground.tasks.base import Batch, Task
from playground.tasks.specs import GymEnvSpec, GymTaskSpec

EVAL_SEED_OFFSET = 1_000_003  # evaluation episodes start from states training never saw


def make_env(spec: GymEnvSpec, num_agents: int, num_envs: int, seeds: Sequence[int], device: torch.device):
    """The env backend `env.backend` names: torch-native ports where they exist (`auto`), else gymnasium; its
    observations scaled to [−1, 1] under `env.normalize_obs`."""
    backend, env_id, seeds = spec.backend, spec.env_id, list(seeds)
    env: TorchClassicEnv | GymnasiumEnv
    if uses_torch_port(backend, env_id):
        if env_id not in TORCH_ENVS:
            raise ValueError(f"env.backend=torch has no port of {env_id!r}; known: {sorted(TORCH_ENVS)}")
        env = make_torch_env(env_id, num_agents, num_envs, seeds, device=device)
    else:
        env = GymnasiumEnv(env_id, num_agents, num_envs, seeds, device=device)
    return ScaledObs(env, env_id, device) if spec.normalize_obs else env


def _noise(gens: list[torch.Generator], shape: tuple[int, ...], device: torch.device, gumbel: bool) -> Tensor:
    """Per-agent randomness for a whole rollout, each agent from its own generator: `(K, *shape)`."""
    draws = []
    for g in gens:
        if gumbel:
            u = torch.rand(shape, generator=g).clamp_(1e-10, 1 - 1e-7)
            draws.append(-torch.log(-torch.log(u)))
        else:
            draws.append(torch.randn(shape, generator=g))
    return torch.stack(draws).to(device)


class EpisodeWindow:
    """The last N completed episodes of one agent: raw return, trained-on return, length, success."""

    score: deque[float]
    rewards: deque[float]
    length: deque[int]
    success: deque[bool]

    def __init__(self, size: int):
        self.score, self.rewards, self.length, self.success = (deque(maxlen=size) for _ in range(4))
        self.completed = 0

    def extend(self, score: list, rewards: list, length: list, success: list) -> None:
        self.score.extend(score)
        self.rewards.extend(rewards)
        self.length.extend(length)
        self.success.extend(bool(s) for s in success)
        self.completed += len(score)


def _window_stats(values: Sequence[float]) -> dict[str, float]:
    """Mean, max, min and (unbiased) std of an episode window, as Python floats: records are plain data."""
    arr = np.asarray(values, dtype=np.float64)
    std = float(arr.std(ddof=1)) if len(arr) > 1 else 0.0
    return {"mean": float(arr.mean()), "max": float(arr.max()), "min": float(arr.min()), "std": std}


class GymTask(Task):
    """The gym family: envs, MLP actor/critic, optional world model, episodes and evaluation."""

    family = "gym"
    score_metric = SCORE_MEAN  # what `task.score_target` and `trainer.stop_on_score` are measured on
    val_score_metric = VAL_SCORE  # what `trainer.stop_on_score_validated` checks at the stop
    model_input_keys = ("obs", "actions")  # what the actor and critic read from a mini-batch
    batched_params = True  # K agents' weights as rows of one tensor
    actor: GymActor
    critic: GymCritic  # every gym task trains one

    def __init__(self, spec: GymTaskSpec, device: torch.device):
        self.spec, self.device = spec, device
        self.num_agents = len(spec.seeds)
        self.seeds = list(spec.seeds)
        self.num_envs, self.rollout_length = spec.env.num_envs, spec.env.rollout_length
        self.env = make_env(spec.env, self.num_agents, self.num_envs, self.seeds, device)
        self.name = spec.name
        self.by_return = spec.success_by_return  # plain values, read every step
        self.success_return = spec.success_return
        init_gens = [torch.Generator().manual_seed(s) for s in self.seeds]
        self.noise_gens = [torch.Generator().manual_seed(s + 1) for s in self.seeds]
        self.actor = GymActor(self.env.obs_dim, list(spec.actor_hidden_sizes), init_gens,
                              num_actions=self.env.num_actions, action_dim=self.env.action_dim,
                              temperature=spec.temperature, init_log_std=spec.init_log_std, device=device)
        self.critic = GymCritic(self.env.obs_dim, list(spec.critic_hidden_sizes), init_gens, device=device)
        self.ref_flat = self.actor.net.flat.detach().clone()  # the frozen reference policy: the initial one
        self.rows_per_step = self.num_envs * self.rollout_length  # transitions per agent per step
        if spec.world_model_hidden_sizes is not None:
            size = self.env.num_actions if self.env.discrete else self.env.action_dim
            self.world_model = MLPWorldModel(self.env.obs_dim, size, list(spec.world_model_hidden_sizes), init_gens,
                                          self.env.discrete, device=device)
        self.windows = [EpisodeWindow(spec.env.episode_window) for _ in range(self.num_agents)]
        self.obs = self.env.reset()
        shape = (self.num_agents, self.num_envs)
        self.ep_score = np.zeros(shape)
        self.ep_rewards = np.zeros(shape)
        self.ep_length = np.zeros(shape, dtype=np.int64)
        self.env_steps = 0
        self._set_reward(spec)
        if not self.env.discrete:
            self.action_low = self.env.action_low.to(device)
            self.action_high = self.env.action_high.to(device)

    def _set_reward(self, spec: GymTaskSpec) -> None:
        """The reward function's settings (`reward.*`): read every step, changed by a resume."""
        reward = spec.reward
        self.noisy_agents = reward.noisy_agents
        self.reward_scale, self.noise_std = (torch.tensor(v, dtype=torch.float32, device=self.device)  # (K,) each
                                             for v in (reward.scale, reward.noise_std))
        self.noise_type = reward.noise_type
        self.nan_rates = list(reward.nan_rates)
        # reward.partial_credit is one value for a batch (not a per-agent key): the task's progress, shaped
        self.shaping = (progress_shaping(spec.progress, spec.shaping_gamma, getattr(self.env, "unscale", None))
                        if spec.progress is not None else None)

    def resume_with(self, spec: GymTaskSpec) -> None:
        self.spec = spec
        self._set_reward(spec)
        self.actor.temperature = spec.temperature

    # ---- run.json facts -------------------------------------------------------------------------------
    def describe(self) -> dict:
        return {"action_space": "discrete" if self.env.discrete else "continuous",
                "max_entropy": self.actor.max_entropy(), "env_id": self.spec.env.env_id,
                "env_backend": type(self.env).__name__, "score_metric": self.score_metric}

    def token_counts(self, batch: Batch) -> dict[str, list[int]]:
        """One env step is one token: the response and all tokens are the transitions of the step."""
        return {"response": [self.rows_per_step] * self.num_agents, "total": [self.rows_per_step] * self.num_agents}

    def update_flops(self, batch: Batch, role: str, epochs: int) -> float:
        """verl's 6·N·T: forward + backward FLOPs of one agent's update (N = weights, T = rows × epochs)."""
        net = self.actor.net if role == "actor" else self.critic.net
        return 6.0 * net.num_params * self.rows_per_step * epochs

    # ---- gen ----------------------------------------------------------------------------------------
    @torch.no_grad()
    def generate(self, agents: Sequence[int] | None = None, policy: nn.Module | None = None) -> Batch:
        """Roll out T steps of N envs per agent; returns the batch in env-major rows `(K, N·T, ...)`. Every agent
        rolls out at once (the envs step together): `agents` may only name all of them. The rollout is the trainer's
        policy itself (no `rollout_source`): `policy` must be None."""
        _no_engine_copy(policy)
        if agents is not None and list(agents) != list(range(self.num_agents)):
            raise ValueError("a gym rollout steps every agent's envs together: it cannot roll out some agents")
        k, n, t_len = self.num_agents, self.num_envs, self.rollout_length
        discrete = self.env.discrete
        size = self.env.num_actions if discrete else self.env.action_dim
        noise = _noise(self.noise_gens, (t_len, n, size), self.device, gumbel=discrete)
        obs_l, act_l, rew_l, term_l, trunc_l, final_l, valid_l = [], [], [], [], [], [], []
        obs = self.obs
        # Inference mode spares each of the rollout's many small ops autograd's bookkeeping. The batch is stacked
        # from these tensors outside it, into ordinary tensors that the update can save for backward.
        with torch.inference_mode():
            for step_noise in noise.unbind(1):
                action = self.actor.act(obs, step_noise)
                env_action = action if discrete else torch.clamp(action, self.action_low, self.action_high)
                step = self.env.step(env_action)
                obs_l.append(obs)
                act_l.append(action)
                rew_l.append(step.reward)
                term_l.append(step.terminated)
                trunc_l.append(step.truncated)
                final_l.append(step.final_obs)
                valid_l.append(step.valid)
                obs = step.obs
        self.obs = obs
        self.env_steps += k * n * t_len

        def rows(items: list[Tensor]) -> Tensor:  # time-major list of (K, N, ...) -> (K, N·T, ...)
            x = torch.stack(items, dim=2)  # (K, N, T, ...)
            return x.reshape(k, n * t_len, *x.shape[3:])

        valid = rows(valid_l) if valid_l[0] is not None else torch.ones(k, n * t_len, dtype=torch.bool,
                                                                           device=self.device)
        reward = rows(rew_l).float()
        trained_reward = reward * self.reward_scale.view(-1, 1)
        if self.shaping is not None:
            trained_reward = trained_reward + self.shaping(rows(obs_l), rows(final_l))
        if any(self.noisy_agents):
            trained_reward = trained_reward + self.noise_std.view(-1, 1) * self._reward_noise(reward.shape)
        trained_reward = self.spec.reward.clipped(trained_reward)
        if any(self.nan_rates):
            trained_reward = torch.where(self._broken_rewards(reward.shape), torch.nan, trained_reward)
        return {
            "agents": list(range(k)), "obs": rows(obs_l), "actions": rows(act_l), "final_obs": rows(final_l),
            "terminated": rows(term_l), "truncated": rows(trunc_l),
            "response_mask": valid.unsqueeze(-1).float(),
            "scores": reward.unsqueeze(-1),  # the task's raw reward
            "token_level_scores": (trained_reward * valid).unsqueeze(-1),  # the reward the agent trains on
        }

    def _broken_rewards(self, shape: tuple[int, ...]) -> Tensor:
        """Which rewards come out NaN (`reward.nan_rate`), per agent from its own generator (none for a rate 0)."""
        draws = [torch.rand(shape[1:], generator=g) < rate if rate > 0 else torch.zeros(shape[1:], dtype=torch.bool)
                 for g, rate in zip(self.noise_gens, self.nan_rates)]
        return torch.stack(draws).to(self.device)

    def _reward_noise(self, shape: tuple[int, ...]) -> Tensor:
        """Heavy-tailed (Cauchy) or normal noise, per agent from its own generator (zeros for agents without)."""
        kind = self.noise_type
        draws = []
        for g, noisy in zip(self.noise_gens, self.noisy_agents):
            if not noisy:  # draw nothing: the agent's generator, and so its rollouts, stay as if it ran alone
                draws.append(torch.zeros(shape[1:]))
            elif kind == "cauchy":
                u = torch.rand(shape[1:], generator=g).clamp_(1e-6, 1 - 1e-6)
                draws.append(torch.tan(math.pi * (u - 0.5)))
            else:
                draws.append(torch.randn(shape[1:], generator=g))
        return torch.stack(draws).to(self.device)

    # ---- old_log_prob / ref / values ----------------------------------------------------------------
    def log_prob_and_entropy(self, batch: Batch) -> tuple[Tensor, Tensor]:
        return self.actor.log_prob_and_entropy(batch)

    def ref_log_prob(self, batch: Batch) -> Tensor:
        return self.actor.log_prob_and_entropy(batch, flat=self.ref_flat)[0]

    def compute_values(self, batch: Batch) -> None:
        """V(s_t), and V(s_{t+1}) for bootstrapping: the final observation's value, 0 after a termination."""
        batch["values"] = self.critic.values(batch)
        next_values = self.critic.values({"obs": batch["final_obs"]})
        batch["next_values"] = next_values * (~batch["terminated"]).unsqueeze(-1)

    # ---- adv ----------------------------------------------------------------------------------------
    def advantage_inputs(self, batch: Batch) -> dict[str, Tensor | None]:
        """GAE runs over each env's time series: rows reshaped to `(K, N, T)`, episodes cut by `dones`."""
        series = lambda x: x.reshape(self.num_agents, self.num_envs, self.rollout_length)  # noqa: E731
        dones = series(batch["terminated"] | batch["truncated"])
        return {"token_level_rewards": series(batch["token_level_rewards"]), "values": series(batch["values"]),
                "response_mask": series(batch["response_mask"]), "next_values": series(batch["next_values"]),
                "dones": dones}

    def advantage_rows(self, x: Tensor) -> Tensor:
        """`(K, N, T)` back to the batch's env-major rows `(K, N·T, 1)`."""
        return x.reshape(self.num_agents, self.num_envs * self.rollout_length, 1)

    # ---- metrics ------------------------------------------------------------------------------------
    def record_step(self, batch: Batch, step: int) -> None:
        """Fold this rollout into each agent's window of completed episodes (host side, once per step)."""
        k, n, t_len = self.num_agents, self.num_envs, self.rollout_length
        to_np = lambda x: x.reshape(k, n, t_len).detach().cpu().numpy()  # noqa: E731
        score, rewards = to_np(batch["scores"]), to_np(batch["token_level_rewards"])
        valid, done = to_np(batch["response_mask"]) > 0, to_np(batch["terminated"] | batch["truncated"])
        terminated = to_np(batch["terminated"])
        ended_parts = []  # per time step: (agents, score, rewards, length, success) of the episodes that ended
        for t in range(t_len):
            v = valid[:, :, t]
            self.ep_score += np.where(v, score[:, :, t], 0.0)
            self.ep_rewards += np.where(v, rewards[:, :, t], 0.0)
            self.ep_length += v
            ended = done[:, :, t] & v
            if ended.any():
                agents, _ = np.nonzero(ended)
                ret = self.ep_score[ended]
                success = ret >= self.success_return if self.by_return else terminated[:, :, t][ended]
                ended_parts.append((agents, ret, self.ep_rewards[ended], self.ep_length[ended], success))
                self.ep_score[ended] = 0.0
                self.ep_rewards[ended] = 0.0
                self.ep_length[ended] = 0
        if ended_parts:  # in completion order, time-major, as episodes are reported by CleanRL and SB3
            agents, *fields = (np.concatenate(column) for column in zip(*ended_parts))
            for agent in np.unique(agents):
                mine = agents == agent
                self.windows[agent].extend(*(f[mine].tolist() for f in fields))

    def agent_metrics(self, agent: int, step: int) -> dict[str, float]:
        """`critic/score/*`, `critic/rewards/*`, `episode/*` over the window; absent before any episode ends."""
        w = self.windows[agent]
        if not w.score:
            return {}
        score, rewards, length = _window_stats(w.score), _window_stats(w.rewards), _window_stats(w.length)
        out = {f"{SCORE}/{name}": value for name, value in score.items()}
        out.update({f"{REWARDS}/{name}": value for name, value in rewards.items()})
        out.update({f"{EPISODE_REWARD}/{name}": score[name] for name in ("mean", "max", "min")})
        out.update({f"{EPISODE_LENGTH}/{name}": length[name] for name in ("mean", "max", "min")})
        out[f"{SUCCESS_RATE}_{self.name}"] = float(np.mean(w.success))
        return out

    # ---- testing ------------------------------------------------------------------------------------
    @torch.inference_mode()
    def validate(self, policy: nn.Module | None = None) -> dict[str, Tensor]:
        """`val/score`: the mean return of `env.eval_episodes` fresh episodes per agent with greedy actions `(K,)`."""
        _no_engine_copy(policy)
        episodes = self.spec.env.eval_episodes
        env = make_env(self.spec.env, self.num_agents, episodes, [s + EVAL_SEED_OFFSET for s in self.seeds],
                       self.device)
        obs = env.reset()
        returns = torch.zeros(self.num_agents, episodes, device=self.device)
        running = torch.ones(self.num_agents, episodes, dtype=torch.bool, device=self.device)
        for _ in range(env.max_episode_steps + 1):
            action = self.actor.act(obs, None)
            if not self.env.discrete:
                action = torch.clamp(action, self.action_low, self.action_high)
            step = env.step(action)
            returns += step.reward * running
            running &= ~(step.terminated | step.truncated)
            obs = step.obs
            if not bool(running.any()):
                break
        env.close()
        return {VAL_SCORE: returns.mean(dim=1)}


def _no_engine_copy(policy: nn.Module | None) -> None:
    if policy is not None:  # the rollout worker refuses a rollout of its own for a task without a rollout_source
        raise ValueError("a gym task's rollout is the trainer's policy itself: it takes no rollout engine's weights")
