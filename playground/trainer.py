"""One PPO training loop for both task families, and for K agents trained as one batch.

A training step follows verl's `RayPPOTrainer.fit` (v0.7), each phase timed as `timing_s/<phase>`:
`gen` (rollout) → `reward` → `old_log_prob` (+ `actor/entropy_loss`) → `ref` → `values` → `adv` (in-reward
KL, advantage estimator) → `update_critic` → `update_actor` (from step `critic_warmup` on) → `testing`.
Steps count from 1; with `val_before_train` a validation-only record is logged at step 0. Every agent gets
its own records, statuses and stop conditions: an agent that diverges or stops leaves the others untouched.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from playground.algos.advantages import ADV_ESTIMATORS, get_adv_estimator_fn
from playground.algos.kl import get_kl_controller, kl_penalty
from playground.algos.losses import agg_loss, explained_variance
from playground.algos.masked import masked_mean, masked_stats
from playground.config import uses_critic
from playground.dynamic_sampling import DynamicSampler
from playground.hparams import AgentHParams
from playground.memory import MemoryGuard, is_oom_error
from playground.metrics import PER_TOKEN_PHASES, STEP, reduce_agent_metrics
from playground.optim import AgentAdamW, lr_factor, warmup_steps
from playground.sinks import RunLogger
from playground.tasks import build_task
from playground.tasks.base import Task
from playground.update import UpdateShape, update_actor, update_critic

# The loss modes' own keys under actor_rollout_ref.actor.policy_loss (each loss reads those it needs).
POLICY_LOSS_KEYS = ("clip_cov_ratio", "clip_cov_lb", "clip_cov_ub", "kl_cov_ratio", "ppo_kl_coef")
# Metrics whose non-finite value means the numbers have broken down (training_crash).
CRASH_KEYS = ("actor/pg_loss", "critic/vf_loss", "actor/grad_norm", "critic/grad_norm", "actor/kl_loss",
              "critic/values/mean", "critic/advantages/mean")


class Trainer:
    """Trains K agents (K = 1 for an ordinary run) that share a task, network and batch shapes.

    Args:
        cfgs: one resolved config per agent; they may differ only in `batched.PER_AGENT_KEYS`.
        run_dirs: one output dir per agent (Hydra's job dirs).
        extra_infos: per agent, more facts for `run.json` (overrides, the rerun command, the device).
        task: the task to train on, built by the caller; default `tasks.build_task` (the config's family).
    """

    def __init__(self, cfgs: Sequence[DictConfig], run_dirs: Sequence[str | Path], device: torch.device,
                 extra_infos: Sequence[dict] | None = None, task: Task | None = None):
        self.cfgs, self.cfg = list(cfgs), cfgs[0]
        self.K = len(cfgs)
        self.device = device
        self.hp = hp = AgentHParams(cfgs, device)
        self.task = build_task(cfgs, hp, device) if task is None else task
        actor_cfg, critic_cfg, algo = self.cfg.actor_rollout_ref.actor, self.cfg.critic, self.cfg.algorithm
        self.use_critic = uses_critic(self.cfg)
        self.use_kl_loss = bool(actor_cfg.use_kl_loss)
        self.use_kl_in_reward = bool(algo.use_kl_in_reward)
        self.total_steps = [int(c.trainer.total_training_steps) for c in cfgs]
        self.stop_scores = [c.trainer.get("stop_on_score") for c in cfgs]
        self.stop_validated = [bool(c.trainer.get("stop_on_score_validated")) and self.task.val_score_metric is not None
                               for c in cfgs]
        self.max_steps = max(self.total_steps)
        # read every step: plain values, not OmegaConf lookups (~30 µs each)
        self.diverge_patience = int(self.cfg.trainer.diverge_patience)
        self.test_freq = int(self.cfg.trainer.test_freq)
        self.critic_warmup = int(self.cfg.trainer.critic_warmup)
        self.kl_penalty_type = str(algo.kl_penalty)
        self.norm_adv, self.norm_adv_by_std_in_grpo = bool(algo.norm_adv), bool(algo.norm_adv_by_std_in_grpo)
        self.policy_loss_mode, self.kl_loss_type = str(actor_cfg.policy_loss.loss_mode), str(actor_cfg.kl_loss_type)
        agent_dim = self.task.batched_params
        self.actor_opt = self._optimizer(self.task.actor.params, "actor_rollout_ref.actor.optim", agent_dim)
        self.critic_opt = self._optimizer(self.task.critic.params, "critic.optim", agent_dim) if self.use_critic \
            else None
        self.world_opt = None
        if self.task.world_model is not None:
            self.world_opt = AgentAdamW(self.task.world_model.params, hp.vector("world_model.lr"))
        self.kl_ctrl = get_kl_controller(algo.kl_ctrl.type, hp.vector("algorithm.kl_ctrl.kl_coef"),
                                         hp.vector("algorithm.kl_ctrl.target_kl"),
                                         hp.vector("algorithm.kl_ctrl.horizon"))
        self.actor_shape = self._update_shape(actor_cfg)
        self.critic_shape = self._update_shape(critic_cfg)
        self.shuffle_gens = [torch.Generator().manual_seed(int(c.trainer.seed) + 2) for c in cfgs]
        # Clip-Cov's random pick of tokens, per agent (verl draws from the global RNG)
        self.loss_gens = [torch.Generator(device=device).manual_seed(int(c.trainer.seed) + 3) for c in cfgs]
        estimator, name = get_adv_estimator_fn(algo.adv_estimator), str(algo.adv_estimator)
        self.estimator = lambda **offered: estimator(**ADV_ESTIMATORS.select(name, offered))
        self.memory = MemoryGuard([c.trainer.memory_limit_gb for c in cfgs], device)
        self.task.watch_memory(self.memory)
        # DAPO's dynamic sampling (token tasks); an agent whose sampling hit its cap ends failed with verl's message
        self.sampler = None
        if algo.filter_groups.enable:
            self.sampler = DynamicSampler(self.task, self.cfg, self._kl_rewards if self.use_kl_in_reward else None)
        self.sampling_errors: list[str | None] = [None] * self.K
        self.active = torch.ones(self.K, dtype=torch.bool, device=device)
        extra_infos = extra_infos or [{}] * self.K
        self.loggers = [RunLogger(c, d, self.task.describe(), agent=k if self.K > 1 else None, extra=e)
                        for k, (c, d, e) in enumerate(zip(cfgs, run_dirs, extra_infos))]
        self.nonfinite_streak = [0] * self.K
        # verl steps each lr scheduler once per update call (training step), not per optimizer step
        self.updates_done = {"actor": 0, "critic": 0}
        self.schedules = {prefix: [self._schedule(c, prefix, total) for c, total in zip(cfgs, self.total_steps)]
                          for prefix in ("actor_rollout_ref.actor.optim", "critic.optim")}
        self.watchers = [self._watcher(c, self.task.describe()) for c in cfgs]

    # ---- construction helpers ------------------------------------------------------------------------
    def _optimizer(self, params, prefix: str, agent_dim: bool) -> AgentAdamW:
        opt = OmegaConf.select(self.cfg, prefix)
        return AgentAdamW(params, self.hp.vector(f"{prefix}.lr"), betas=tuple(opt.betas), eps=opt.eps,
                          weight_decay=self.hp.vector(f"{prefix}.weight_decay"), agent_dim=agent_dim)

    def _update_shape(self, role_cfg: DictConfig) -> UpdateShape:
        # verl: a mini-batch counts prompts (× rollout.n sequences); a micro-batch counts sequences
        mini = role_cfg.ppo_mini_batch_size * self.task.rows_per_unit
        micro = role_cfg.ppo_micro_batch_size_per_gpu
        return UpdateShape(ppo_epochs=role_cfg.ppo_epochs, mini_batch_rows=mini,
                           micro_batch_rows=mini if micro is None else micro,
                           shuffle=bool(role_cfg.get("shuffle", False)), loss_agg_mode=role_cfg.loss_agg_mode,
                           max_token_len=int(role_cfg.ppo_max_token_len_per_gpu) if role_cfg.use_dynamic_bsz else None)

    def _watcher(self, cfg: DictConfig, facts: dict):
        if cfg.trainer.stop_on_finding is None:
            return None
        from playground.diagnose.engine import FindingWatcher

        info = {"family": cfg.task.family, "score_target": float(cfg.task.score_target), **facts}
        return FindingWatcher(cfg.trainer.stop_on_finding, cfg, info=info)

    @staticmethod
    def _schedule(cfg: DictConfig, prefix: str, total: int) -> dict:
        o = OmegaConf.select(cfg, prefix)
        return {"total_steps": total, "warmup_steps": warmup_steps(o.lr_warmup_steps, o.lr_warmup_steps_ratio, total),
                "scheduler_type": o.lr_scheduler_type, "min_lr_ratio": o.min_lr_ratio, "num_cycles": o.num_cycles}

    def _set_lr(self, opt: AgentAdamW, prefix: str, role: str) -> None:
        """The lr of this update: verl's schedule at the number of this role's earlier update calls."""
        factors = [lr_factor(self.updates_done[role], **schedule) for schedule in self.schedules[prefix]]
        opt.lr = opt.base_lr * torch.tensor(factors, device=opt.base_lr.device)
        self.updates_done[role] += 1

    @contextmanager
    def _timed(self, timing: dict[str, float], name: str):
        start = time.perf_counter()
        yield
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        timing[name] = timing.get(name, 0.0) + time.perf_counter() - start

    # ---- the loop -------------------------------------------------------------------------------------
    def fit(self) -> list[str]:
        """Train until every agent stops; returns each agent's final status."""
        statuses: list[str | None] = [None] * self.K
        try:
            if self.cfg.trainer.val_before_train:  # verl validates at step 0 whatever test_freq is
                timing: dict[str, float] = {}
                val = self._validate(timing)
                for k in range(self.K):
                    record = {STEP: 0, **{key: float(v[k]) for key, v in val.items()}}
                    self.loggers[k].log(record)
                    if self.watchers[k] is not None:  # the score it starts from, as the full diagnosis reads it
                        self.watchers[k].update(record)
            for step in range(1, self.max_steps + 1):
                records = self.train_step(step)
                over_memory = self.memory.over_limit()
                for k, record in enumerate(records):
                    if statuses[k] is None:
                        statuses[k] = self._after_step(k, step, record, over_memory[k])
                if all(s is not None for s in statuses):
                    break
        except KeyboardInterrupt as stop:
            self._finish_all(statuses, "interrupted", str(stop) or "interrupted by the user (Ctrl-C)")
            raise
        except Exception as error:  # noqa: BLE001 - every failure becomes a status with its message
            if is_oom_error(error):
                self._finish_all(statuses, "oom", f"out of memory: {error}")
            else:
                self._finish_all(statuses, "failed", f"{type(error).__name__}: {error}")
                raise
        finally:
            self.memory.close()
        self._finish_all(statuses, "finished", None)
        return [s or "finished" for s in statuses]

    def _finish_all(self, statuses: list[str | None], status: str, error: str | None) -> None:
        for k in range(self.K):
            if statuses[k] is None:
                statuses[k] = status
                self.loggers[k].finish(status, error)

    def _after_step(self, k: int, step: int, record: dict[str, float], over_memory: bool) -> str | None:
        """Log agent k's step and decide whether it stops: its new status, or None to go on."""
        if self.sampling_errors[k] is not None:  # verl raises before the update: this step is not logged
            self.active[k] = False
            self.loggers[k].finish("failed", self.sampling_errors[k])
            return "failed"
        self.loggers[k].log(record)
        crashed = any(key in record and record[key] != record[key] or abs(record.get(key, 0.0)) == float("inf")
                      for key in CRASH_KEYS)
        self.nonfinite_streak[k] = self.nonfinite_streak[k] + 1 if crashed else 0
        status, error, reason = None, None, None
        if self.nonfinite_streak[k] >= self.diverge_patience:
            status, error = "diverged", f"losses stayed non-finite for {self.nonfinite_streak[k]} steps"
        elif over_memory:
            status, error = "oom", "out of memory: this agent's share passed trainer.memory_limit_gb"
        elif self.watchers[k] is not None and self.watchers[k].update(record):
            status, reason = "finished", f"stop_on_finding: {self.watchers[k].finding_id} found"
        elif self._reached_score(k, record) and self._validated(k, record):
            metrics = self.task.score_metric + (f" and {self.task.val_score_metric}" if self.stop_validated[k] else "")
            status, reason = "finished", f"stop_on_score: {metrics} reached {self.stop_scores[k]}"
        elif step >= self.total_steps[k]:
            status, reason = "finished", "total_training_steps reached"
        if status is not None:
            self.active[k] = False
            self.loggers[k].finish(status, error, stop_reason=reason)
        return status

    def _reached_score(self, k: int, record: dict[str, float]) -> bool:
        target = self.stop_scores[k]
        return target is not None and record.get(self.task.score_metric, -float("inf")) >= target

    def _validated(self, k: int, record: dict[str, float]) -> bool:
        """With `stop_on_score_validated`, the validation run at this step must reach the target too."""
        if not self.stop_validated[k]:
            return True
        return record.get(self.task.val_score_metric, -float("inf")) >= self.stop_scores[k]

    def train_step(self, step: int) -> list[dict[str, float]]:
        """One PPO step for every agent; returns each agent's metrics record."""
        task, hp, timing = self.task, self.hp, {}
        metrics: dict[str, list] = {}
        with self._timed(timing, "step"):
            batch = self._rollout(timing, metrics)
            if batch is None:  # every agent still training ended its sampling at the cap
                return [{} for _ in range(self.K)]
            mask = batch["response_mask"]
            with self._timed(timing, "old_log_prob"), torch.no_grad():
                old_log_probs, entropy = task.log_prob_and_entropy(batch)
                batch["old_log_probs"] = old_log_probs
                metrics["actor/entropy_loss"] = [agg_loss(entropy, mask, self.actor_shape.loss_agg_mode)]
            if self.use_kl_loss or self.use_kl_in_reward:
                with self._timed(timing, "ref"), torch.no_grad():
                    batch["ref_log_prob"] = task.ref_log_prob(batch)
            if self.use_critic:
                with self._timed(timing, "values"), torch.no_grad():
                    task.compute_values(batch)
            with self._timed(timing, "adv"):
                metrics.update(self._compute_advantage(batch))
            if self.use_critic:
                with self._timed(timing, "update_critic"):
                    self._set_lr(self.critic_opt, "critic.optim", "critic")
                    metrics["critic/lr"] = [self.critic_opt.lr]
                    metrics.update(update_critic(
                        task.critic, self.critic_opt, batch, self.critic_shape,
                        cliprange_value=hp.view3("critic.cliprange_value"),
                        grad_clip=hp.vector("critic.grad_clip", none_as=float("inf")),
                        generators=self.shuffle_gens, active=self.active,
                        model_input_keys=task.model_input_keys, memory_guard=self.memory))
            if self.critic_warmup <= step:
                with self._timed(timing, "update_actor"):
                    actor_metrics = self._update_actor(batch)
                    in_update = actor_metrics.pop("actor/entropy_loss", None)
                    metrics.update(actor_metrics)
                    # verl: when the update computes entropy (entropy_coeff != 0) its value replaces the pre-update
                    # one; per agent, since agents of a batch may differ in entropy_coeff
                    if in_update is not None:
                        coeff = hp.vector("actor_rollout_ref.actor.entropy_coeff")
                        metrics["actor/entropy_loss"] = [torch.where(coeff != 0, torch.stack(in_update).mean(0),
                                                                     metrics["actor/entropy_loss"][0])]
            if self.world_opt is not None:
                metrics.update(self._update_world_model(batch))
        metrics["actor/entropy"] = metrics["actor/entropy_loss"]  # verl >= 0.4's name of the same value
        for role, shape in (("actor", self.actor_shape), ("critic", self.critic_shape)):
            seconds = timing.get(f"update_{role}")
            if seconds:
                flops = task.update_flops(batch, role, shape.ppo_epochs)
                metrics[f"perf/mfu/{role}"] = [torch.full((self.K,), flops / seconds / task.peak_flops)]
        records = self._records(step, batch, metrics, timing)
        active = self.active.tolist()  # an agent that stopped has closed its files
        for k, samples in enumerate(task.samples(batch, step)):
            if samples and active[k]:
                self.loggers[k].log_samples(samples)
        # agents evaluated now: on their test steps, and an agent that stops on its score as it stops
        testing = [bool(self.active[k]) and (self._is_test_step(step, k) or self._reached_score(k, r))
                   for k, r in enumerate(records)]
        if any(testing):
            val = self._validate(timing)
            for k, record in enumerate(records):
                if testing[k]:
                    record.update({key: float(v[k]) for key, v in val.items()})
                    record["timing_s/testing"] = timing["testing"]
        return records

    def _rollout(self, timing: dict[str, float], metrics: dict[str, list]):
        """The step's scored batch (`gen`, `reward`); with dynamic sampling as many generation batches as each
        agent needs. None when every agent still training failed to fill its batch."""
        task = self.task
        if self.sampler is None:
            with self._timed(timing, "gen"):
                batch = task.generate()
            self.memory.check("gen")
            with self._timed(timing, "reward"):
                task.compute_scores(batch)
            return batch
        sampled = self.sampler.sample(self.active.tolist(), lambda name: self._timed(timing, name), self.memory)
        metrics["train/num_gen_batches"] = [sampled.num_gen_batches.to(self.device)]
        training = self.active.clone()
        for k, error in enumerate(sampled.errors):
            if error is not None:
                self.sampling_errors[k] = error
                training[k] = False
        if not bool(training.any()):
            return None
        self.active.copy_(training)  # a failed agent's rows only fill the batch: its optimizer does not step
        return sampled.batch

    def _kl_rewards(self, batch, timed) -> None:
        """verl's DAPO trainer with `use_kl_in_reward`: each generation batch's old and reference log-probs and its
        KL-penalised reward before filtering (the step's batch recomputes them; the controller updates once)."""
        with timed("old_log_prob"), torch.no_grad():
            batch["old_log_probs"] = self.task.log_prob_and_entropy(batch)[0]
        with timed("ref"), torch.no_grad():
            batch["ref_log_prob"] = self.task.ref_log_prob(batch)
        batch["token_level_rewards"], _ = self._kl_penalised(batch, batch["agents"])

    def _kl_penalised(self, batch, agents=None):
        """verl's apply_kl_penalty: `token_level_scores − β·KL(old ‖ ref)` per token, with β from the controller before
        its update; returns the rewards and the masked per-token KL."""
        kld = kl_penalty(batch["old_log_probs"], batch["ref_log_prob"], self.kl_penalty_type) * batch["response_mask"]
        beta = self.kl_ctrl.value.to(self.device).expand(self.K)
        beta = beta if agents is None else beta[list(agents)]
        return batch["token_level_scores"] - beta.reshape(-1, 1, 1) * kld, kld

    def _compute_advantage(self, batch) -> dict[str, list]:
        out: dict[str, list] = {}
        mask = batch["response_mask"]
        if self.use_kl_in_reward:
            batch["token_level_rewards"], kld = self._kl_penalised(batch)
            beta = self.kl_ctrl.value.to(self.device)
            seq_kl = masked_mean(kld, mask, dim=-1)  # per-sequence token mean, then mean over sequences
            current_kl = seq_kl.mean(dim=-1)
            out["actor/reward_kl_penalty"] = [current_kl]
            out["actor/reward_kl_penalty_coeff"] = [beta.expand(self.K)]
            self.kl_ctrl.update(current_kl, n_steps=mask.shape[1])
        else:
            batch["token_level_rewards"] = batch["token_level_scores"]
        adv, ret = self.task.compute_advantage(
            batch, self.estimator, gamma=self.hp.view3("algorithm.gamma"), lam=self.hp.view3("algorithm.lam"),
            norm_adv=self.norm_adv, norm_adv_by_std_in_grpo=self.norm_adv_by_std_in_grpo)
        batch["advantages"], batch["returns"] = adv, ret
        return out

    def _update_actor(self, batch) -> dict[str, list]:
        hp, prefix = self.hp, "actor_rollout_ref.actor"
        self._set_lr(self.actor_opt, f"{prefix}.optim", "actor")
        lr = self.actor_opt.lr
        metrics = update_actor(
            self.task, self.actor_opt, batch, self.actor_shape,
            loss_mode=self.policy_loss_mode,
            clip_ratio=hp.view3(f"{prefix}.clip_ratio"),
            clip_ratio_low=hp.view3(f"{prefix}.clip_ratio_low", fallback=f"{prefix}.clip_ratio"),
            clip_ratio_high=hp.view3(f"{prefix}.clip_ratio_high", fallback=f"{prefix}.clip_ratio"),
            clip_ratio_c=hp.view3(f"{prefix}.clip_ratio_c"), entropy_coeff=hp.view3(f"{prefix}.entropy_coeff"),
            use_kl_loss=self.use_kl_loss, kl_loss_coef=hp.view3(f"{prefix}.kl_loss_coef"),
            kl_loss_type=self.kl_loss_type,
            grad_clip=hp.vector(f"{prefix}.grad_clip", none_as=float("inf")), generators=self.shuffle_gens,
            active=self.active, memory_guard=self.memory,
            policy_loss_kwargs={**{key: hp.view3(f"{prefix}.policy_loss.{key}") for key in POLICY_LOSS_KEYS},
                                "generator": self.loss_gens})
        metrics = dict(metrics)
        metrics["actor/lr"] = [lr]
        if not self.use_kl_loss:
            metrics["actor/kl_loss"] = [torch.zeros(self.K, device=self.device)]  # verl logs 0.0 when off
        return metrics

    def _update_world_model(self, batch) -> dict[str, list]:
        self.world_opt.zero_grad()
        loss = self.task.world_model.loss(batch)
        loss.sum().backward()
        grad_norm = self.world_opt.step(None, self.active)
        return {"world_model/loss": [loss.detach()], "world_model/grad_norm": [grad_norm]}

    def _is_test_step(self, step: int, agent: int) -> bool:
        """verl: every `test_freq` steps and at the last step (`test_freq` is shared; the last step is the agent's)."""
        freq = self.test_freq
        return freq > 0 and (step % freq == 0 or step == self.total_steps[agent])

    def _validate(self, timing: dict[str, float]) -> dict[str, torch.Tensor]:
        with self._timed(timing, "testing"):
            return self.task.validate()

    # ---- records ---------------------------------------------------------------------------------------
    def _records(self, step: int, batch, metrics: dict[str, list], timing: dict[str, float]) -> list[dict]:
        """Reduce everything to one flat record per agent, with one host transfer for the tensors."""
        task, mask = self.task, batch["response_mask"]
        data = {**masked_stats("critic/advantages", batch["advantages"], mask),
                **masked_stats("critic/returns", batch["returns"], mask)}
        if self.use_critic:
            data.update(masked_stats("critic/values", batch["values"], mask))
            data["critic/vf_explained_var"] = explained_variance(batch["returns"], batch["values"], mask)
        data.update(task.batch_metrics(batch))
        # one host transfer for all metric tables and one for the batch statistics, one reduction per metric for
        # all agents, then plain Python floats per agent
        per_agent = lambda v: torch.as_tensor(v, device=self.device).float().reshape(self.K)  # noqa: E731
        tables = [torch.stack([per_agent(v) for v in values]) for values in metrics.values()]
        host = np.split(torch.cat(tables).cpu().numpy(), np.cumsum([len(t) for t in tables])[:-1])
        reduced = reduce_agent_metrics(dict(zip(metrics, host)))
        data_cpu = dict(zip(data, torch.stack([per_agent(v) for v in data.values()]).cpu().tolist()))
        task.record_step(batch, step)
        memory = self.memory.metrics()
        tokens = task.token_counts(batch)
        timing_record = {f"timing_s/{name}": seconds for name, seconds in timing.items()}
        records = []
        for k in range(self.K):
            record = {STEP: float(step)}
            record.update({key: values[k] for key, values in reduced.items()})
            record.update({key: values[k] for key, values in data_cpu.items()})
            record.update(task.agent_metrics(k, step))
            record.update(timing_record)
            for phase in PER_TOKEN_PHASES:
                if phase in timing:
                    divisor = tokens["response"] if phase == "gen" else tokens["total"]
                    record[f"timing_per_token_ms/{phase}"] = 1000 * timing[phase] / max(1, divisor[k])
            record["perf/total_num_tokens"] = float(tokens["total"][k])
            record["perf/time_per_step"] = timing["step"]
            record["perf/throughput"] = tokens["total"][k] / timing["step"]  # one device per run
            record.update(memory)
            records.append(record)
        return records
