"""The task interface: everything the trainer uses of a task family, written down once.

The trainer (`playground.trainer`) runs verl's PPO step on a `Task` and nothing else: the task owns the
environment or the prompts, the models, the reward and the validation; the trainer owns the update, the
optimizers, the schedules, the stop conditions and the records. A task serves K agents at once (K = 1 for an
ordinary run): every tensor in a batch is `(K, rows, ...)` — `rows` sequences (token tasks) or transitions (gym
tasks, one "token" each) — and every per-agent metric is `(K,)`.

Per-step state travels in the batch, as verl carries `uid` in its `DataProto`: what `generate` knows about the
rows (their group ids, lengths, texts) goes into the batch it returns, and later calls read it back from there.
Fields that are not tensors (texts, ground truths) are per-agent lists `[K][rows]`, like verl's
`non_tensor_batch`. Fields every task fills:

    response_mask        (K, rows, T)  1 on real response tokens (gym: a valid transition)
    scores               (K, rows, T)  the task's raw reward (token tasks: on the last response token)
    token_level_scores   (K, rows, T)  the reward the agent trains on (after reward.scale and noise)

`compute_values` adds `values`; the trainer adds `old_log_probs`, `ref_log_prob`, `token_level_rewards`,
`advantages` and `returns`. To add a task family, subclass `Task` (docs/adding-a-task.md walks through one).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, Protocol

from torch import Tensor

from playground.update import Batch


class Trainable(Protocol):
    """A model the trainer's optimizer steps."""

    params: list[Tensor]  # the tensors the optimizer updates (with a leading agent dim when `Task.batched_params`)


class ValueModel(Trainable, Protocol):
    def values(self, batch: Batch) -> Tensor:
        """V for every response token of a (mini-)batch: `(K, rows, T)`."""


class WorldModel(Trainable, Protocol):
    """An optional model trained beside the policy (`world_model.enable`): it only adds `world_model/*` metrics."""

    def loss(self, batch: Batch) -> Tensor:
        """Its loss on this step's batch, per agent `(K,)` (the trainer steps its optimizer on the sum)."""


class Task(ABC):
    """One task family as the trainer sees it. Subclasses set the attributes and implement the abstract methods;
    the others have defaults that a task without that part keeps."""

    family: ClassVar[str]  # "gym" | "token": picks the diagnosis's thresholds and the family's own config checks
    score_metric: ClassVar[str]  # the metric `task.score_target` and `trainer.stop_on_score` are measured on
    val_score_metric: ClassVar[str | None] = None  # what `trainer.stop_on_score_validated` checks (None: none)
    model_input_keys: ClassVar[tuple[str, ...]]  # the batch fields the actor's and critic's forward read
    batched_params: bool = False  # parameters carry a leading agent dim (the optimizer steps K at once)

    num_agents: int  # K
    actor: Trainable  # the policy the actor optimizer steps (its log-probs come from `log_prob_and_entropy`)
    rows_per_step: int  # rows per agent per step: sequences (prompts × rollout.n) or transitions
    rows_per_unit: int = 1  # rows per unit of ppo_mini_batch_size (verl counts prompts: rollout.n sequences each)
    peak_flops: float = float("inf")  # the device's peak FLOP/s, for perf/mfu/* (inf: MFU reads 0)
    critic: ValueModel | None = None  # required when the config trains a critic (`config.uses_critic`)
    world_model: WorldModel | None = None  # the optional world-model hook

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """Facts for `run.json`: at least `action_space` and `max_entropy` (the diagnosis reads them)."""

    # ---- one PPO step, in the order the trainer calls them ---------------------------------------------------
    @abstractmethod
    def generate(self) -> Batch:
        """Roll out this step's batch with the current policy (the `gen` phase)."""

    def compute_scores(self, batch: Batch) -> None:
        """Fill `scores` and `token_level_scores` (the `reward` phase); a task whose rollout already scored its
        rows keeps this no-op."""
        return None

    @abstractmethod
    def log_prob_and_entropy(self, batch: Batch) -> tuple[Tensor, Tensor]:
        """The current policy's log-prob of each response token and its entropy, each `(K, rows, T)`; called on
        the whole batch (old log-probs) and on every micro-batch of the update (with gradients)."""

    @abstractmethod
    def ref_log_prob(self, batch: Batch) -> Tensor:
        """The frozen reference policy's log-probs `(K, rows, T)` (KL loss, KL in the reward)."""

    def compute_values(self, batch: Batch) -> None:
        """Fill `values` `(K, rows, T)` from the critic (only called when a critic trains)."""
        batch["values"] = self.critic.values(batch)

    @abstractmethod
    def compute_advantage(self, batch: Batch, estimator: Callable[..., tuple[Tensor, Tensor]],
                          **kwargs: Any) -> tuple[Tensor, Tensor]:
        """`(advantages, returns)` from the registered `estimator` (`algorithm.adv_estimator`), given the task's
        layout of the rows (gym: each env's time series; token: `index` = the batch's `uid`)."""

    def watch_memory(self, guard) -> None:
        """Let the memory guard (`memory.MemoryGuard`) measure inside the task's own passes, where memory peaks
        between the trainer's checks (a checkpointed backward); a task without such a pass keeps this no-op."""
        return None

    # ---- what the records say ------------------------------------------------------------------------------------
    def batch_metrics(self, batch: Batch) -> dict[str, Tensor]:
        """Per-agent `(K,)` metrics of this batch (verl's `compute_data_metrics`: scores, rewards, lengths)."""
        return {}

    @abstractmethod
    def token_counts(self, batch: Batch) -> dict[str, list[int]]:
        """Per agent, `response` tokens and `total` (prompt + response) tokens of this batch (timing per token)."""

    @abstractmethod
    def update_flops(self, batch: Batch, role: str, epochs: int) -> float:
        """FLOPs of one agent's `role` ("actor" or "critic") update over this batch with `epochs` passes (verl's
        6·N·T), for MFU."""

    def record_step(self, batch: Batch, step: int) -> None:
        """Fold the finished step into the task's own running state (gym: episode windows)."""
        return None

    def samples(self, batch: Batch, step: int) -> list[list[dict]]:
        """Per agent, rows of this step for `samples.jsonl` (token tasks: what the model said)."""
        return [[] for _ in range(self.num_agents)]

    def agent_metrics(self, agent: int, step: int) -> dict[str, float]:
        """One agent's metrics that the task keeps itself (episode statistics, the data epoch)."""
        return {}

    @abstractmethod
    def validate(self) -> dict[str, Tensor]:
        """Validation metrics `(K,)` (`val/*`), run every `trainer.test_freq` steps and at the end."""
