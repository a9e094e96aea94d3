"""A sweep's jobs trained as batches of agents: which jobs can share one `Trainer`, why the others cannot, and
running a batch so that every agent's run directory is the one `train.run` would have written.

The Hydra side (job dirs, `.hydra/` files, `JobReturn`s) lives in `hydra_plugins/playground_batched`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from playground.config.keys import config_diff, flatten
from playground.config.schema import as_plain_dict

# Hyperparameters that may differ between agents trained together as one batch (`hydra/launcher=batched`).
PER_AGENT_KEYS = (
    "actor_rollout_ref.actor.optim.lr", "actor_rollout_ref.actor.optim.weight_decay",
    "actor_rollout_ref.actor.optim.lr_warmup_steps", "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio",
    "actor_rollout_ref.actor.optim.min_lr_ratio", "actor_rollout_ref.actor.optim.lr_scheduler_type",
    "critic.optim.lr", "critic.optim.weight_decay", "critic.optim.lr_warmup_steps",
    "critic.optim.lr_warmup_steps_ratio", "critic.optim.min_lr_ratio", "critic.optim.lr_scheduler_type",
    "actor_rollout_ref.actor.clip_ratio", "actor_rollout_ref.actor.clip_ratio_low",
    "actor_rollout_ref.actor.clip_ratio_high", "actor_rollout_ref.actor.clip_ratio_c",
    "actor_rollout_ref.actor.entropy_coeff", "actor_rollout_ref.actor.kl_loss_coef",
    "actor_rollout_ref.actor.policy_loss.clip_cov_ratio", "actor_rollout_ref.actor.policy_loss.clip_cov_lb",
    "actor_rollout_ref.actor.policy_loss.clip_cov_ub", "actor_rollout_ref.actor.policy_loss.kl_cov_ratio",
    "actor_rollout_ref.actor.policy_loss.ppo_kl_coef",
    "actor_rollout_ref.actor.grad_clip", "critic.grad_clip", "critic.cliprange_value",
    "algorithm.gamma", "algorithm.lam", "algorithm.kl_ctrl.kl_coef", "algorithm.kl_ctrl.target_kl",
    "algorithm.kl_ctrl.horizon", "reward.scale", "reward.noise_std", "reward.nan_rate",
    "trainer.seed", "trainer.total_training_steps", "trainer.memory_limit_gb", "trainer.stop_on_finding",
    "trainer.stop_on_score", "trainer.stop_on_score_validated",
    "trainer.experiment_name", "trainer.mystery", "scenario",
)
MAX_LISTED_KEYS = 3  # a reason line names at most this many differing keys, then "and N more"


def leaf_values(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config as `dotted.key -> value` (lists stay whole), without the `hydra` node."""
    plain = as_plain_dict(cfg, resolve=True)
    plain.pop("hydra", None)
    return flatten(plain)


def structural_values(leaves: dict[str, Any]) -> dict[str, Any]:
    """The flattened config without `PER_AGENT_KEYS`: what must be equal for agents to share a batch."""
    return {k: v for k, v in leaves.items() if k not in PER_AGENT_KEYS}


def batch_signature(cfg: DictConfig, leaves: dict[str, Any] | None = None) -> str:
    """The part of a config that fixes tensor shapes: configs with equal signatures can train as one batch.

    `leaves`: the config's `leaf_values`, when the caller has them already.
    """
    return repr(sorted(structural_values(leaf_values(cfg) if leaves is None else leaves).items()))


def unbatchable_reason(cfg: DictConfig) -> str | None:
    """Why a job must run alone in its own process, or None when it can join a batch (token tasks always can: their
    agents share the SFT base, which the task, model and `sft.*` keys of the signature fix)."""
    if cfg.task.family == "token":
        return None
    from playground.envs.torch_classic import uses_torch_port

    backend, env_id = cfg.env.backend, cfg.task.env_id
    if not uses_torch_port(backend, env_id):
        return f"env.backend={backend} steps {env_id} with gymnasium on the host (batches need a torch port)"
    return None


def _job_list(job_ids: Sequence[int]) -> str:
    ids = list(job_ids)
    if len(ids) > 2 and ids == list(range(ids[0], ids[-1] + 1)):
        return f"jobs {ids[0]}-{ids[-1]}"
    return ("job " if len(ids) == 1 else "jobs ") + ", ".join(str(i) for i in ids)


@dataclass
class BatchPlan:
    """How a sweep's jobs run: `batches` (positions of jobs trained together) and `solo` (position -> reason)."""

    batches: list[list[int]] = field(default_factory=list)
    solo: dict[int, str] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)  # what the launcher prints, one line per batch / solo job


def plan_batches(cfgs: Sequence[DictConfig], max_agents: int = 1024, job_ids: Sequence[int] | None = None,
                 errors: dict[int, str] | None = None) -> BatchPlan:
    """Group jobs by `config.batch_signature`; jobs alone in their group, or unbatchable, run one by one.

    Args:
        cfgs: one resolved job config per job (the task config, without `hydra`).
        max_agents: the largest batch; bigger groups are split into consecutive batches.
        job_ids: the jobs' numbers in the sweep (for the lines); default `0..n-1`.
        errors: position -> config error of jobs that cannot run at all (they get a line and no batch).

    Returns:
        the plan, with one line per batch ("batch of 3 agents (jobs 0-2): differing in ...") and one per job
        that runs alone ("job 3 runs alone: no other job in this sweep can be batched with it").
    """
    job_ids = list(range(len(cfgs))) if job_ids is None else list(job_ids)
    errors = errors or {}
    plan = BatchPlan()
    groups: dict[str, list[int]] = {}
    leaves: dict[int, dict[str, Any]] = {}  # each batchable job's flattened config, resolved once
    for pos, cfg in enumerate(cfgs):
        if pos in errors:
            continue
        reason = unbatchable_reason(cfg)
        if reason is not None:
            plan.solo[pos] = reason
        else:
            leaves[pos] = leaf_values(cfg)
            groups.setdefault(batch_signature(cfg, leaves[pos]), []).append(pos)
    ranked = sorted(groups.values(), key=lambda m: (-len(m), m[0]))
    for members in ranked:
        if len(members) > 1:
            for start in range(0, len(members), max_agents):
                plan.batches.append(members[start:start + max_agents])
            continue
        pos = members[0]
        others = [m for m in ranked if m is not members]
        if not others:
            plan.solo[pos] = "no other job in this sweep can be batched with it"
            continue
        ref = others[0]
        diff = config_diff(structural_values(leaves[pos]), structural_values(leaves[ref[0]]))
        shown = ", ".join(f"{k} ({mine} vs {theirs})" for k, mine, theirs in diff[:MAX_LISTED_KEYS])
        if len(diff) > MAX_LISTED_KEYS:
            shown += f" and {len(diff) - MAX_LISTED_KEYS} more"
        what = "the batch of " + _job_list([job_ids[m] for m in ref]) if len(ref) > 1 else _job_list([job_ids[ref[0]]])
        plan.solo[pos] = f"differs from {what} in {shown}"
    for batch in plan.batches:
        differing = sorted({key for pos in batch[1:] for key, _, _ in config_diff(leaves[batch[0]], leaves[pos])})
        agents = "1 agent" if len(batch) == 1 else f"{len(batch)} agents"
        plan.lines.append(f"batch of {agents} ({_job_list([job_ids[p] for p in batch])}): "
                          + (f"differing in {', '.join(differing)}" if differing else "identical configs"))
    for pos in sorted(plan.solo):
        plan.lines.append(f"job {job_ids[pos]} runs alone: {plan.solo[pos]}")
    for pos in sorted(errors):
        plan.lines.append(f"job {job_ids[pos]}: error: {errors[pos]}")
    return plan


def batch_threads(setting: Any, num_agents: int) -> int | None:
    """The torch threads a CPU batch trains with, from the launcher's `num_threads` (None: the jobs' own
    `trainer.num_threads`).

    "auto" gives a batch of two or more agents every core this process may use: its tensors are large enough to
    split (measured in docs/tuning.md), and a given thread count still gives the same metrics on every run. Where
    `OMP_NUM_THREADS` is set (`make` sets 1), it caps them: on cores that other work keeps busy, threads that wait for
    each other at OpenMP's barriers made an 18-run sweep take 21 min instead of 1 (docs/sweeps.md), and the variable
    is how a shell says so. A lone agent keeps its config's threads.
    """
    if setting is None or (setting == "auto" and num_agents < 2):
        return None
    if setting == "auto":
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        cap = os.environ.get("OMP_NUM_THREADS", "")
        return min(cores, int(cap)) if cap.isdigit() and int(cap) >= 1 else cores
    if isinstance(setting, bool) or not isinstance(setting, int) or setting < 1:
        raise ValueError(f"hydra.launcher.num_threads={setting!r}: expected auto, null or an integer >= 1")
    return setting


def train_batch(cfgs: Sequence[DictConfig], run_dirs: Sequence[str | Path],
                overrides: Sequence[Sequence[str]], num_threads: int | None = None) -> list[str]:
    """Train configs that share a batch signature as K agents of one `Trainer`; returns each agent's status.

    Every agent's run dir gets what `train.run` writes for a solo run: `run.json` (with the job's overrides and
    rerun command), `metrics.jsonl`, `.hydra/config.yaml` (unless the launcher wrote it) and `findings.json`.
    `num_threads` replaces the jobs' `trainer.num_threads` on CPU (see `batch_threads`); `run.json` records the
    threads used.
    """
    from playground.train import fit

    return fit(cfgs, run_dirs, overrides, num_threads=num_threads).statuses
