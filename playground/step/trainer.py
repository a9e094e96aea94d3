"""One PPO training loop for both task families, and for K agents trained as one batch.

A training step follows verl's `RayPPOTrainer.fit` (v0.7), each phase timed as `timing_s/<phase>`:
`gen` (rollout) → `reward` → `old_log_prob` (+ the entropy metric) → `ref` → `values` → `adv` (in-reward
KL, advantage estimator) → `update_critic` → `update_actor` (from step `critic_warmup` on) → `testing`.
Steps count from 1; with `val_before_train` a validation-only record is logged at step 0. Every agent gets
its own records, outcome and stop conditions: an agent that diverges or stops leaves the others untouched.

The step calls the workers (`workers`: rollout, actor, reference, critic), the task's reward and validation, and
plain functions (`advantage`); the stop rules (`stopping`) and the per-step record (`records`) are units of their
own. docs/step.md walks through one step.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

import torch
from torch import Tensor

from playground.metric_names import NUM_GEN_BATCHES, TESTING_TIME
from playground.rundir.sinks import LogSpec
from playground.step.advantage import AdvantageEstimator, KLInReward, compute_advantage
from playground.step.dynamic_sampling import DynamicSampler, Timed
from playground.step.hparams import StepHParams
from playground.step.memory import MemoryGuard, is_oom_error
from playground.step.records import StepRecorder
from playground.step.rollout_correction import RolloutCorrection
from playground.step.stopping import AgentOutcome, Stop, StopRules, StopSpec
from playground.step.token_records import TokenProbe, TokenRecordSpec
from playground.step.update import entropy_metrics
from playground.step.workers import TaskActor, TaskCritic, TaskReference, TaskRollout, WorldModelTrainer
from playground.tasks import build_task
from playground.tasks.base import Batch, Task
from playground.tasks.specs import GymTaskSpec, TokenTaskSpec

if TYPE_CHECKING:
    from playground.tasks.base_build import PreparedBase


@dataclass(frozen=True)
class AgentSpec:
    """One agent's own run: what it writes, when it stops, its share of the memory."""

    log: LogSpec
    stop: StopSpec
    memory_limit_gb: float | None  # trainer.memory_limit_gb


@dataclass(frozen=True, eq=False)
class RunSpec:
    """A run of K agents (K = 1 for an ordinary run), resolved at the entry (`run_spec.resolve_run`): what the
    `Trainer` and its parts are built from."""

    family: str  # task.family
    step: StepHParams
    task: GymTaskSpec | TokenTaskSpec | None  # None: a family with no spec, whose task the caller builds
    agents: tuple[AgentSpec, ...]
    peak_flops: float  # the device's peak FLOP/s for perf/mfu/* (trainer.peak_flops, else verl's table; inf: none)
    token_records: TokenRecordSpec | None  # None: trainer.token_records.enable is off
    resume: Resume | None = None  # None: the run trains with these settings throughout

    @property
    def num_agents(self) -> int:
        return len(self.agents)


@dataclass(frozen=True, eq=False)
class Resume:
    """A resume mid-run (`onset_step`): from `step` on the run trains with `spec`'s settings, resumed from its own
    state (what each role's `load_contents` says), as a run restarted from its checkpoint with a changed config."""

    step: int  # the first step trained with `spec`
    spec: RunSpec


class Trainer:
    """Trains K agents (K = 1 for an ordinary run) that share a task, network and batch shapes.

    Args:
        spec: the K configs, resolved at the entry (`run_spec.resolve_run`).
        run_dirs: one output dir per agent (Hydra's job dirs).
        extra_infos: per agent, more facts for `run.json` (overrides, the rerun command, the device).
        task: the task to train on, built by the caller; default `tasks.build_task` (the spec's family).
        prepared_base: a token task's prompts and SFT base, made ready at the entry (`base_build.prepare_base`).
    """

    def __init__(self, spec: RunSpec, run_dirs: Sequence[str | Path], device: torch.device,
                 extra_infos: Sequence[dict] | None = None, task: Task | None = None,
                 prepared_base: PreparedBase | None = None):
        self.spec, self.num_agents, self.device = spec, spec.num_agents, device
        self.hp = hp = spec.step
        self.task = task = build_task(spec.task, spec.family, device, prepared_base) if task is None else task
        # the workers; the actor and the critic shuffle their rows with the same generators (the critic first)
        self.shuffle_gens = [torch.Generator().manual_seed(seed + 2) for seed in hp.seeds]
        self._build_workers(hp)
        self.world_model = WorldModelTrainer(task, hp) if task.world_model is not None else None
        self.reference = TaskReference(task)
        self.kl_in_reward = KLInReward(hp.kl_ctrl, hp.kl_penalty, self.num_agents, device) \
            if hp.kl_ctrl is not None else None
        # measured from here on: the models and the optimizers' state are the run's baseline
        self.memory = MemoryGuard([agent.memory_limit_gb for agent in spec.agents], device)
        task.watch_memory(self.memory)
        self._build_sampler(hp)
        self.sampling_errors: list[str | None] = [None] * self.num_agents
        self.active = torch.ones(self.num_agents, dtype=torch.bool, device=device)  # agents still training
        facts = task.describe()
        self.recorder = StepRecorder([agent.log for agent in spec.agents], run_dirs, task, facts,
                                     extra_infos or [{}] * self.num_agents, hp.use_critic, device, spec.peak_flops,
                                     spec.token_records)
        self.stops = StopRules([agent.stop for agent in spec.agents], hp.total_steps, hp.diverge_patience,
                               task.score_metric, task.val_score_metric, facts)

    def _build_workers(self, hp: StepHParams) -> None:
        """The rollout, its correction, the actor, the critic and the advantage estimator, from `hp`."""
        task = self.task
        self.rollout = TaskRollout(task, hp.rollout, hp.rollout_correction)
        # algorithm.rollout_correction (verl's rollout_corr_helper): applied only where the rollout hands on its
        # log-probs (a correction, or rollout.calculate_log_probs' metrics-only mode); bypass mode is the actor's loss
        correction = RolloutCorrection(hp.rollout_correction)
        self.rollout_corr = correction if self.rollout.keep_log_probs else None
        self.actor = TaskActor(task, hp, self.shuffle_gens, self.device,
                               bypass=correction.spec if correction.bypass_mode else None)
        self.critic = TaskCritic(task, hp, self.shuffle_gens) if hp.use_critic else None
        self.estimator = AdvantageEstimator(hp)

    def _build_sampler(self, hp: StepHParams) -> None:
        # DAPO's dynamic sampling (token tasks); an agent whose sampling hit its cap ends failed with verl's message
        self.sampler = DynamicSampler(self.task, self.rollout, hp.dynamic_sampling, self.actor, self.reference,
                                      self.kl_in_reward) if hp.dynamic_sampling is not None else None

    def resume(self, spec: RunSpec) -> None:
        """Go on with `spec`'s settings from this run's own state, as a run restarted from its checkpoint with a
        changed config: the task takes its new reward and sampling settings, the rollout engine restarts (loaded
        with the actor's weights as they are now), and the actor and the critic are rebuilt and load from the state
        they had what their `load_contents` says (the model always; `optimizer`: AdamW's moments and step counts;
        `extra`: the lr scheduler's position). Not rebuilt: the reference, the in-reward KL's controller, the world
        model, the records and the stop rules (nothing a resume changes); the generators go on where they were."""
        actor, critic = self.actor, self.critic
        self.hp = hp = spec.step
        self.task.resume_with(spec.task)
        self._build_workers(hp)
        self.actor.load(actor, hp.actor.load_contents)
        if self.critic is not None and critic is not None and hp.critic is not None:
            self.critic.load(critic, hp.critic.load_contents)
        self._build_sampler(hp)

    @contextmanager
    def _timed(self, timing: dict[str, float], name: str) -> Iterator[None]:
        start = time.perf_counter()
        yield
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        timing[name] = timing.get(name, 0.0) + time.perf_counter() - start

    # ---- the loop -------------------------------------------------------------------------------------------------
    def fit(self) -> list[AgentOutcome]:
        """Train until every agent stops; returns what happened to each agent."""
        outcomes: list[AgentOutcome | None] = [None] * self.num_agents
        step = 0
        try:
            if self.hp.val_before_train:  # verl validates at step 0 whatever test_freq is
                for k, record in enumerate(self.recorder.validation_records(0, self._validate({}))):
                    self.recorder.log(k, record)
                    self.stops.watch_start(k, record)
            for step in range(1, max(self.hp.total_steps) + 1):
                if self.spec.resume is not None and step == self.spec.resume.step:
                    self.resume(self.spec.resume.spec)
                records = self.train_step(step)
                over_memory = self.memory.over_limit()
                for k, record in enumerate(records):
                    if outcomes[k] is None:
                        outcomes[k] = self._after_step(k, step, record, over_memory[k])
                if all(o is not None for o in outcomes):
                    break
        except KeyboardInterrupt as stop:
            self._finish_all(outcomes, step, Stop("interrupted", str(stop) or "interrupted by the user (Ctrl-C)"))
            raise
        except Exception as error:  # noqa: BLE001 - every failure becomes an outcome with its message
            if is_oom_error(error):
                self._finish_all(outcomes, step, Stop("oom", f"out of memory: {error}"))
            else:
                self._finish_all(outcomes, step, Stop("failed", f"{type(error).__name__}: {error}"))
                raise
        finally:
            self.memory.close()
        self._finish_all(outcomes, step, Stop("finished"))
        return cast(list[AgentOutcome], outcomes)  # _finish_all ended every agent still running: none is None

    def _finish_all(self, outcomes: list[AgentOutcome | None], step: int, stop: Stop) -> None:
        """End every agent still running as `stop` says; a failure mid-step leaves that step unlogged."""
        steps_done = step if stop.status == "finished" else max(0, step - 1)
        for k in range(self.num_agents):
            if outcomes[k] is None:
                outcomes[k] = AgentOutcome(stop.status, steps_done, stop.reason, stop.error)
                self.recorder.finish(k, stop.status, stop.error)

    def _after_step(self, k: int, step: int, record: dict[str, float], over_memory: bool) -> AgentOutcome | None:
        """Log agent k's step and decide whether it stops: its outcome, or None to go on."""
        if self.sampling_errors[k] is not None:  # verl raises before the update: this step is not logged
            self.active[k] = False
            self.recorder.finish(k, "failed", self.sampling_errors[k])
            return AgentOutcome("failed", step - 1, None, self.sampling_errors[k])
        self.recorder.log(k, record)
        stop = self.stops.check(k, step, record, over_memory)
        if stop is None:
            return None
        self.active[k] = False
        self.recorder.finish(k, stop.status, stop.error, stop.reason)
        return AgentOutcome(stop.status, step, stop.reason, stop.error)

    def train_step(self, step: int) -> list[dict[str, float]]:
        """One PPO step for every agent, in verl's phase order; returns each agent's metrics record."""
        hp, task = self.hp, self.task
        timing: dict[str, float] = {}
        metrics: dict[str, list[Tensor]] = {}
        timed = lambda name: self._timed(timing, name)  # noqa: E731
        with timed("step"):
            batch = self._generate(timed, metrics)  # gen, reward
            if batch is None:  # every agent still training ended its sampling at the cap
                return [{} for _ in range(self.num_agents)]
            probe = self._token_probe(batch) if self.recorder.token_records is not None else None
            entropy_before = None
            if self.actor.bypass is not None:  # verl: the rollout's log-probs are the old ones, not recomputed
                assert self.rollout_corr is not None, "bypass mode is a correction: the rollout hands on its log-probs"
                self.rollout_corr.apply_bypass_mode(batch)
            else:
                with timed("old_log_prob"):
                    old = self.actor.compute_log_prob(batch)
                    batch["old_log_probs"], entropy_before = old.log_probs, old.entropy
                    if probe is not None:
                        batch["token_entropy"] = old.token_entropy
                    metrics.update(entropy_metrics(entropy_before))  # the update may measure it again
                    metrics.update(self.rollout.debug_metrics(batch))  # verl: with rollout.calculate_log_probs
            if hp.use_kl_loss or hp.use_kl_in_reward:
                with timed("ref"):
                    batch["ref_log_prob"] = self.reference.compute_ref_log_prob(batch)
            if self.critic is not None:
                with timed("values"):
                    self.critic.compute_values(batch)
            with timed("adv"):
                if self.rollout_corr is not None:  # decoupled: IS weights, rejection, rollout_corr/*
                    metrics.update(self.rollout_corr.apply(batch))
                metrics.update(compute_advantage(batch, task, self.estimator, self.kl_in_reward))
            if self.critic is not None:
                with timed("update_critic"):
                    metrics.update(self.critic.update(batch, self.active, self.memory))
            if hp.critic_warmup <= step:
                with timed("update_actor"):
                    metrics.update(self.actor.update(batch, self.active, self.memory, entropy_before, probe))
            if self.world_model is not None:
                metrics.update(self.world_model.update(batch, self.active))
        self.recorder.add_mfu(metrics, batch, timing, self._update_epochs())
        records = self.recorder.step_records(step, batch, metrics, timing, self.memory)
        self.recorder.log_samples(batch, step, self.active.tolist())
        if probe is not None:
            self.recorder.log_token_records(step, batch, probe, self.active.tolist())
        self._test(step, records, timing)
        return records

    def _token_probe(self, batch: Batch) -> TokenProbe:
        """The step's per-token records' probe of the update (the clip masks where the loss is vanilla PPO's), and
        each row's index in the batch, which the update's shuffles carry along."""
        hp, mask = self.hp, batch["response_mask"]
        batch["row_index"] = torch.arange(mask.shape[1], device=self.device).expand(mask.shape[0], -1)
        vanilla = hp.policy_loss_mode == "vanilla" and self.actor.bypass is None
        return TokenProbe((hp.clip_ratio_low, hp.clip_ratio_high, hp.clip_ratio_c) if vanilla else None)

    def _generate(self, timed: Timed, metrics: dict[str, list]) -> Batch | None:
        """The step's scored batch (`gen`, `reward`); with dynamic sampling as many generation batches as each
        agent needs. None when every agent still training failed to fill its batch."""
        if self.sampler is None:
            with timed("gen"):
                batch = self.rollout.generate()
            self.memory.check("gen")
            with timed("reward"):
                self.task.compute_scores(batch)
            return batch
        sampled = self.sampler.sample(self.active.tolist(), timed, self.memory)
        metrics[NUM_GEN_BATCHES] = [sampled.num_gen_batches.to(self.device)]
        training = self.active.clone()
        for k, error in enumerate(sampled.errors):
            if error is not None:
                self.sampling_errors[k] = error
                training[k] = False
        if not bool(training.any()):
            return None
        self.active.copy_(training)  # a failed agent's rows only fill the batch: its optimizer does not step
        return sampled.batch

    def _test(self, step: int, records: list[dict[str, float]], timing: dict[str, float]) -> None:
        """`testing`: validate the agents evaluated now, on their test steps and, for an agent that stops on its
        score, as it stops; their records get the validation metrics."""
        testing = [bool(self.active[k]) and (self._is_test_step(step, k) or self.stops.reached_score(k, r))
                   for k, r in enumerate(records)]
        if any(testing):
            val = self._validate(timing)
            for k, record in enumerate(records):
                if testing[k]:
                    record.update({key: float(v[k]) for key, v in val.items()})
                    record[TESTING_TIME] = timing["testing"]

    def _update_epochs(self) -> dict[str, int]:
        epochs = {"actor": self.actor.shape.ppo_epochs}
        if self.critic is not None:
            epochs["critic"] = self.critic.shape.ppo_epochs
        return epochs

    def _is_test_step(self, step: int, agent: int) -> bool:
        """verl: every `test_freq` steps and at the last step (`test_freq` is shared; the last step is the agent's)."""
        freq = self.hp.test_freq
        return freq > 0 and (step % freq == 0 or step == self.hp.total_steps[agent])

    def _validate(self, timing: dict[str, float]) -> dict[str, torch.Tensor]:
        with self._timed(timing, "testing"):
            return self.rollout.validate()
