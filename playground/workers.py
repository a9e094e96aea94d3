"""The step's workers, as verl's: the rollout generates, the actor computes log-probs under the trainer's weights and
updates them, the reference computes the frozen policy's log-probs, the critic computes values and updates them.

Each worker is written down once as a Protocol (what the step calls) and implemented over a `Task` (what the task
family supplies: environment or prompts, models). The step (`trainer.Trainer.train_step`) calls the workers; no
worker calls back into the trainer. The rollout owns its copy of the policy (`rollout_engine`: its precision, its
staleness, its weight sync) and verl's rollout-vs-trainer probes (`algos.rollout_debug`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import torch
from omegaconf import DictConfig, OmegaConf
from torch import Tensor

from playground.algos.losses import agg_loss
from playground.algos.policy_registry import POLICY_LOSSES
from playground.algos.rollout_debug import per_agent, rollout_probs_diff, trajectory_staleness
from playground.hparams import AgentHParams, StepHParams
from playground.memory import MemoryGuard
from playground.optim import AgentAdamW, lr_factor, warmup_steps
from playground.rollout_engine import RolloutSpec, RolloutWeights
from playground.tasks.base import Batch, Task
from playground.update import Metrics, UpdateShape, update_actor, update_critic

ACTOR_OPTIM, CRITIC_OPTIM = "actor_rollout_ref.actor.optim", "critic.optim"


# ---- the interfaces -------------------------------------------------------------------------------------------------
class Rollout(Protocol):
    """Generation: the `gen` phase (gym rollouts, sampled responses)."""

    def generate(self, agents: Sequence[int] | None = None) -> Batch:
        """This step's rows for every agent (`agents=None`), or more rows of the same step for some agents: the
        `gen` fields of `Batch`."""


class Actor(Protocol):
    """The policy under the trainer's weights: `old_log_prob` and `update_actor`."""

    def compute_log_prob(self, batch: Batch) -> tuple[Tensor, Tensor]:
        """`(log_probs, entropy)` `(K, rows, T)` of the batch's responses, without gradients."""

    def update(self, batch: Batch, active: Tensor, memory: MemoryGuard, entropy_before: Tensor | None,
               rollout_correction: dict[str, Any] | None = None) -> Metrics:
        """One PPO update of the agents in `active`; returns its metrics as lists of `(K,)` tensors.
        `entropy_before`: the old log-prob pass's `actor/entropy_loss`, None where no such pass ran (bypass mode);
        `rollout_correction`: bypass mode's settings (`RolloutCorrection.bypass_settings`), else None."""


class Reference(Protocol):
    """The frozen reference policy: `ref`."""

    def compute_ref_log_prob(self, batch: Batch) -> Tensor:
        """`(K, rows, T)` log-probs of the batch's responses under the reference."""


class Critic(Protocol):
    """The value model: `values` and `update_critic`."""

    def compute_values(self, batch: Batch) -> None:
        """Fill `values` (and what the task bootstraps from, gym: `next_values`)."""

    def update(self, batch: Batch, active: Tensor, memory: MemoryGuard) -> Metrics:
        """One value update of the agents in `active`; returns its metrics as lists of `(K,)` tensors."""


# ---- construction helpers -------------------------------------------------------------------------------------------
def make_optimizer(params, cfg: DictConfig, hp: AgentHParams, prefix: str, agent_dim: bool) -> AgentAdamW:
    opt = OmegaConf.select(cfg, prefix)
    return AgentAdamW(params, hp.vector(f"{prefix}.lr"), betas=tuple(opt.betas), eps=opt.eps,
                      weight_decay=hp.vector(f"{prefix}.weight_decay"), agent_dim=agent_dim)


def update_shape(role_cfg: DictConfig, rows_per_unit: int) -> UpdateShape:
    # verl: a mini-batch counts prompts (× rollout.n sequences); a micro-batch counts sequences
    mini = role_cfg.ppo_mini_batch_size * rows_per_unit
    micro = role_cfg.ppo_micro_batch_size_per_gpu
    return UpdateShape(ppo_epochs=role_cfg.ppo_epochs, mini_batch_rows=mini,
                       micro_batch_rows=mini if micro is None else micro,
                       shuffle=bool(role_cfg.get("shuffle", False)), loss_agg_mode=role_cfg.loss_agg_mode,
                       max_token_len=int(role_cfg.ppo_max_token_len_per_gpu) if role_cfg.use_dynamic_bsz else None)


class LRSchedule:
    """verl's lr scheduler of one role, per agent, stepped once per update call (training step), not per optimizer
    step."""

    def __init__(self, cfgs: Sequence[DictConfig], prefix: str, total_steps: Sequence[int]):
        self.updates_done = 0
        self.schedules = []
        for cfg, total in zip(cfgs, total_steps):
            o = OmegaConf.select(cfg, prefix)
            self.schedules.append({
                "total_steps": total, "scheduler_type": o.lr_scheduler_type, "min_lr_ratio": o.min_lr_ratio,
                "warmup_steps": warmup_steps(o.lr_warmup_steps, o.lr_warmup_steps_ratio, total),
                "num_cycles": o.num_cycles})

    def apply(self, opt: AgentAdamW) -> Tensor:
        """Set this update's lr (the schedule at the number of earlier update calls) and return it `(K,)`."""
        factors = [lr_factor(self.updates_done, **schedule) for schedule in self.schedules]
        opt.lr = opt.base_lr * torch.tensor(factors, device=opt.base_lr.device)
        self.updates_done += 1
        return opt.lr


# ---- the implementations over a task --------------------------------------------------------------------------------
def rollout_correction_on(cfg: DictConfig) -> bool:
    """Whether verl's `algorithm.rollout_correction` corrects or rejects anything (it reads `rollout_log_probs`)."""
    rc = OmegaConf.select(cfg, "algorithm.rollout_correction", default=None)
    return rc is not None and any(rc.get(key) for key in ("rollout_is", "rollout_rs", "bypass_mode"))


class TaskRollout:
    """verl's rollout engine over the task's generation: its own weights (`rollout_engine.RolloutWeights`: shared
    with the actor unless its dtype, staleness or weight sync differ), synced before each step's generation.

    It hands on `rollout_log_probs` (the log-probs it reports for its sampled tokens) with
    `rollout.calculate_log_probs` or a rollout correction, and each row's staleness when its weights can lag."""

    def __init__(self, task: Task, cfg: DictConfig):
        self.task, self.spec = task, RolloutSpec.from_cfg(cfg)
        self.keep_log_probs = self.spec.calculate_log_probs or rollout_correction_on(cfg)
        # a rollout that matches the trainer (the default) generates with the actor's own model: no copy, nothing to
        # sync; a task without a model of its own to copy (gym) always rolls out with the trainer's policy
        self.weights = None
        if task.rollout_model is not None and self.spec.owns_weights:
            self.weights = RolloutWeights(task.rollout_model, self.spec)
            task.rollout_model = self.weights.model
        elif task.rollout_model is None and self.spec.owns_weights:
            raise ValueError(f"actor_rollout_ref.rollout.{{dtype,staleness,weight_sync}}: a {task.family} task's "
                             "rollout is the trainer's policy itself: allowed only float32, 0 and full")

    def generate(self, agents: Sequence[int] | None = None) -> Batch:
        if agents is None and self.weights is not None:  # a step starts: verl's update_weights before gen
            self.weights.sync()
        batch = self.task.generate(agents)
        rollout_log_probs = batch.pop("rollout_log_probs", None)
        if self.keep_log_probs and rollout_log_probs is not None:  # a gym rollout has none (config.py keeps it off)
            batch["rollout_log_probs"] = rollout_log_probs
        if self.spec.staleness > 0:
            assert self.weights is not None, "a stale rollout owns its weights (RolloutSpec.owns_weights)"
            batch["rollout_staleness"] = torch.full(batch["response_mask"].shape[:2], self.weights.versions_behind,
                                                    device=batch["response_mask"].device)
        return batch

    def debug_metrics(self, batch: Batch) -> dict[str, list[Tensor]]:
        """verl's `calculate_debug_metrics` (the rollout's log-probs against the actor's old log-probs) and the rows'
        staleness, per agent."""
        metrics: dict[str, list[Tensor]] = {}
        if "rollout_log_probs" in batch:
            metrics.update(per_agent(rollout_probs_diff, batch["old_log_probs"], batch["rollout_log_probs"],
                                     batch["response_mask"]))
        if "rollout_staleness" in batch:
            metrics.update(per_agent(trajectory_staleness, batch["rollout_staleness"]))
        return metrics


class TaskReference:
    def __init__(self, task: Task):
        self.task = task

    @torch.no_grad()
    def compute_ref_log_prob(self, batch: Batch) -> Tensor:
        return self.task.ref_log_prob(batch)


class TaskActor:
    """verl's actor worker: the task's policy, its optimizer and lr schedule, and the PPO update (`update.py`).

    Args:
        shuffle_gens: per agent, the generator that shuffles the update's rows (shared with the critic, which
            draws first in a step).
    """

    def __init__(self, task: Task, cfgs: Sequence[DictConfig], hp: AgentHParams, step_hp: StepHParams,
                 shuffle_gens: list[torch.Generator], device: torch.device):
        self.task, self.hp, self.shuffle_gens = task, step_hp, shuffle_gens
        self.optimizer = make_optimizer(task.actor.params, cfgs[0], hp, ACTOR_OPTIM, task.batched_params)
        self.shape = update_shape(cfgs[0].actor_rollout_ref.actor, task.rows_per_unit)
        self.schedule = LRSchedule(cfgs, ACTOR_OPTIM, step_hp.total_steps)
        # Clip-Cov's random pick of tokens, per agent (verl draws from the global RNG)
        loss_gens = [torch.Generator(device=device).manual_seed(int(c.trainer.seed) + 3) for c in cfgs]
        self.policy_loss_kwargs = POLICY_LOSSES.select(step_hp.policy_loss_mode, {
            "clip_ratio": step_hp.clip_ratio, "clip_ratio_low": step_hp.clip_ratio_low,
            "clip_ratio_high": step_hp.clip_ratio_high, "clip_ratio_c": step_hp.clip_ratio_c,
            **step_hp.policy_loss, "generator": loss_gens})
        self.no_kl_loss = torch.zeros(step_hp.num_agents, device=device)  # verl logs 0.0 when the KL loss is off

    @torch.no_grad()
    def compute_log_prob(self, batch: Batch) -> tuple[Tensor, Tensor]:
        return self.task.log_prob_and_entropy(batch)

    def entropy_loss(self, entropy: Tensor, batch: Batch) -> Tensor:
        """`actor/entropy_loss`: the per-token entropy aggregated as the actor's loss is, `(K,)`."""
        return agg_loss(entropy, batch["response_mask"], self.shape.loss_agg_mode)

    def update(self, batch: Batch, active: Tensor, memory: MemoryGuard, entropy_before: Tensor | None,
               rollout_correction: dict[str, Any] | None = None) -> Metrics:
        """`entropy_before`: `actor/entropy_loss` of the old log-prob pass; verl replaces it by the update's when the
        update computes entropy (entropy_coeff != 0), per agent, since agents of a batch may differ in it. None in
        rollout correction's bypass mode (`rollout_correction`: its settings), which skips that pass: the update's."""
        hp = self.hp
        lr = self.schedule.apply(self.optimizer)
        metrics = update_actor(
            self.task, self.optimizer, batch, self.shape, loss_mode=hp.policy_loss_mode,
            entropy_coeff=hp.entropy_coeff, use_kl_loss=hp.use_kl_loss, kl_loss_coef=hp.kl_loss_coef,
            kl_loss_type=hp.kl_loss_type, grad_clip=hp.actor_grad_clip, generators=self.shuffle_gens,
            active=active, memory_guard=memory, policy_loss_kwargs=self.policy_loss_kwargs,
            rollout_correction=rollout_correction)
        in_update = metrics.pop("actor/entropy_loss", None)
        if in_update is not None:
            update_entropy = torch.stack(in_update).mean(0)
            metrics["actor/entropy_loss"] = [update_entropy if entropy_before is None else torch.where(
                hp.entropy_coeff.view(-1) != 0, update_entropy, entropy_before)]
        metrics["actor/lr"] = [lr]
        if not hp.use_kl_loss:
            metrics["actor/kl_loss"] = [self.no_kl_loss]
        return metrics


class TaskCritic:
    """verl's critic worker: the task's value model, its optimizer and lr schedule, and the value update."""

    def __init__(self, task: Task, cfgs: Sequence[DictConfig], hp: AgentHParams, step_hp: StepHParams,
                 shuffle_gens: list[torch.Generator]):
        assert task.critic is not None, "a critic worker trains the task's critic (config.uses_critic)"
        self.task, self.hp, self.shuffle_gens = task, step_hp, shuffle_gens
        self.optimizer = make_optimizer(task.critic.params, cfgs[0], hp, CRITIC_OPTIM, task.batched_params)
        self.shape = update_shape(cfgs[0].critic, task.rows_per_unit)
        self.schedule = LRSchedule(cfgs, CRITIC_OPTIM, step_hp.total_steps)

    @torch.no_grad()
    def compute_values(self, batch: Batch) -> None:
        self.task.compute_values(batch)

    def update(self, batch: Batch, active: Tensor, memory: MemoryGuard) -> Metrics:
        lr = self.schedule.apply(self.optimizer)
        metrics = update_critic(self.task.critic, self.optimizer, batch, self.shape,
                                cliprange_value=self.hp.cliprange_value, grad_clip=self.hp.critic_grad_clip,
                                generators=self.shuffle_gens, active=active,
                                model_input_keys=self.task.model_input_keys, memory_guard=memory)
        metrics["critic/lr"] = [lr]
        return metrics


class WorldModelTrainer:
    """The optional world model (`world_model.enable`), trained beside the policy on each step's batch."""

    def __init__(self, task: Task, hp: AgentHParams):
        assert task.world_model is not None, "built only for a task with a world model (world_model.enable)"
        self.model = task.world_model
        self.optimizer = AgentAdamW(self.model.params, hp.vector("world_model.lr"))

    def update(self, batch: Batch, active: Tensor) -> dict[str, list[Tensor]]:
        self.optimizer.zero_grad()
        loss = self.model.loss(batch)
        loss.sum().backward()
        grad_norm = self.optimizer.step(None, active)
        return {"world_model/loss": [loss.detach()], "world_model/grad_norm": [grad_norm]}


if TYPE_CHECKING:  # mypy holds each implementation to its interface, whether or not a caller names the interface
    _IMPLEMENTATIONS: tuple[type[Rollout], type[Actor], type[Reference], type[Critic]] = (
        TaskRollout, TaskActor, TaskReference, TaskCritic)
