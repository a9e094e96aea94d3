"""The task interface and the batch it fills: everything the trainer uses of a task family, written down once.

The trainer (`playground.step.trainer`) runs verl's PPO step through its workers (`playground.step.workers`: rollout,
actor, reference, critic); the task supplies what they run on: the environment or the prompts, the models, the reward
and the validation. A task serves K agents at once (K = 1 for an ordinary run): every tensor in a batch is
`(K, rows, ...)` — `rows` sequences (token tasks) or transitions (gym tasks, one "token" each) — and every
per-agent metric is `(K,)`. To add a task family, subclass `Task` (docs/adding-a-task.md walks through one).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypedDict, cast

from torch import Tensor, nn

if TYPE_CHECKING:
    from playground.rollout.turns import EpisodeTrace


class Batch(TypedDict, total=False):
    """One step's rows, as verl's `DataProto`: tensors `(K, rows, ...)` (its `batch`), and per-agent lists `[K][rows]`
    for fields that are not tensors (its `non_tensor_batch`). Per-step state travels here, as verl carries `uid`:
    what `generate` knows about the rows goes into the batch, and later phases read it back from there.

    Each field says its shape and which phase writes it (T: response tokens; a gym transition is one token). The
    update reads only tensor fields, and only those it names (`Task.model_input_keys` and its own).
    """

    # gen (`Task.generate`, run by the rollout worker): every task
    agents: list[int]  # the agent of each leading position (all K, or some for dynamic sampling's extra draws)
    response_mask: Tensor  # (K, rows, T) float, 1 on real response tokens (gym: a valid transition)
    # gen, gym tasks: the transitions, env-major (`(K, N·T, ...)`: a reshape gives each env's time series)
    obs: Tensor  # (K, rows, obs_dim)
    actions: Tensor  # (K, rows) discrete, (K, rows, action_dim) continuous
    final_obs: Tensor  # (K, rows, obs_dim) the observation after the step (before an auto-reset)
    terminated: Tensor  # (K, rows) bool
    truncated: Tensor  # (K, rows) bool
    # gen, token tasks: the sequences (prompt left-padded, response right-padded)
    input_ids: Tensor  # (K, rows, P + T)
    attention_mask: Tensor  # (K, rows, P + T)
    position_ids: Tensor  # (K, rows, P + T)
    responses: Tensor  # (K, rows, T)
    uid: Tensor  # (K, rows) the prompt's group id (rows of one prompt share it)
    prompt_length: Tensor  # (K, rows)
    response_length: Tensor  # (K, rows)
    ground_truth: list[list[str]]  # [K][rows]
    prompt_text: list[list[str]]  # [K][rows]
    reward_baselines: Tensor  # (K, rows) ReMax's greedy reward (verl's `gen_max`), only for adv_estimator=remax
    # gen, multi-turn token tasks (`agent_loop.episode_fields`): each row's episode, scored by its outcome
    episode_score: Tensor  # (K, rows) the outcome's score, which the reward manager takes instead of a text rule's
    episode_acc: Tensor  # (K, rows) the outcome's acc
    turn_rewards: Tensor  # (K, rows, T) each environment reply's reward on the turn-end token it answers
    num_turns: Tensor  # (K, rows) verl's num_turns
    tool_calls: Tensor  # (K, rows)
    episodes: list[list[EpisodeTrace]]  # [K][rows] the traces themselves (metrics, samples)
    # gen, the rollout worker: what the rollout engine itself reports, under ITS weights, precision and sampling path
    # (token tasks), kept with `actor_rollout_ref.rollout.calculate_log_probs=true` or a rollout correction on
    # (`algorithm.rollout_correction` reads it: verl's name)
    rollout_log_probs: Tensor  # (K, rows, T) the sampled tokens' log-probs (`rollout.logprobs_mode`); 0 where masked
    rollout_staleness: Tensor  # (K, rows) updates the rollout's weights lagged the actor's, with rollout.staleness > 0
    # reward (`Task.compute_scores`; a gym rollout scores its rows as it goes)
    scores: Tensor  # (K, rows, T) the task's raw reward (token tasks: on the last response token)
    token_level_scores: Tensor  # (K, rows, T) the reward the agent trains on (after reward.scale and noise)
    response_text: list[list[str]]  # [K][rows] token tasks: the decoded responses
    reward_extra_info: dict[str, Tensor]  # name -> (K, rows) token tasks: the rule's per-row facts (`score`, `acc`)
    # old_log_prob (actor worker), ref (reference worker), values (critic worker)
    old_log_probs: Tensor  # (K, rows, T) under the weights that generated the rows
    rollout_is_weights: Tensor  # (K, rows, T) rollout correction's IS weights π_old/π_rollout (decoupled mode)
    ref_log_prob: Tensor  # (K, rows, T) under the frozen reference (KL loss, KL in the reward)
    values: Tensor  # (K, rows, T) V(s_t) before the update
    next_values: Tensor  # (K, rows, T) gym: V(s_{t+1}) for bootstrapping, 0 after a termination
    # adv (`playground.step.advantage`)
    token_level_rewards: Tensor  # (K, rows, T) the scores, minus the KL penalty with use_kl_in_reward
    advantages: Tensor  # (K, rows, T)
    returns: Tensor  # (K, rows, T)
    # the step's per-token records only (`trainer.token_records`, `playground.step.token_records`)
    row_index: Tensor  # (K, rows) each row's index, carried through the update's shuffles
    token_entropy: Tensor  # (K, rows, T) the old log-prob pass's entropy of each token


def batch_fields(batch: Batch, keys: Iterable[str]) -> dict[str, Any]:
    """The fields named in `keys` that the batch has, in that order. For keys held in variables
    (`Task.model_input_keys`, the update's lists), which the checker cannot match to `Batch`'s."""
    fields: Mapping[str, Any] = batch
    return {key: fields[key] for key in keys if key in fields}


def as_batch(fields: dict[str, Any]) -> Batch:
    """A dict built under keys held in variables (a micro-batch, a gathered batch) as the `Batch` it is: the checker
    cannot tell which keys such a dict has."""
    return cast(Batch, fields)


class Trainable(Protocol):
    """A model the trainer's optimizer steps."""

    @property
    def params(self) -> Sequence[Tensor]:
        """The tensors the optimizer updates (with a leading agent dim when `Task.batched_params`)."""


class MemoryCheck(Protocol):
    """What a task's own passes may call on the memory guard (`step.memory.MemoryGuard`, a layer above the tasks)."""

    def check(self, where: str) -> None:
        """Measure now; raise when the agents are past their memory caps. `where`: the pass, for the error."""


class ValueModel(Trainable, Protocol):
    def values(self, batch: Batch) -> Tensor:
        """V for every response token of a (mini-)batch: `(K, rows, T)`."""


class WorldModel(Trainable, Protocol):
    """An optional model trained beside the policy (`world_model.enable`): it only adds `world_model/*` metrics."""

    def loss(self, batch: Batch) -> Tensor:
        """Its loss on this step's batch, per agent `(K,)` (the trainer steps its optimizer on the sum)."""


class Task(ABC):
    """One task family as the trainer sees it. Subclasses set the attributes and implement the abstract methods;
    the others have defaults that a task without that part keeps. No method calls back into the trainer."""

    family: ClassVar[str]  # "gym" | "token": picks the diagnosis's thresholds and the family's own config checks
    score_metric: ClassVar[str]  # the metric `task.score_target` and `trainer.stop_on_score` are measured on
    val_score_metric: ClassVar[str | None] = None  # what `trainer.stop_on_score_validated` checks (None: none)
    model_input_keys: ClassVar[tuple[str, ...]]  # the batch fields the actor's and critic's forward read
    batched_params: bool = False  # parameters carry a leading agent dim (the optimizer steps K at once)

    num_agents: int  # K
    actor: Trainable  # the policy the actor optimizer steps (its log-probs come from `log_prob_and_entropy`)
    rows_per_step: int  # rows per agent per step: sequences (prompts × rollout.n) or transitions
    rows_per_unit: int = 1  # rows per unit of ppo_mini_batch_size (verl counts prompts: rollout.n sequences each)
    critic: ValueModel | None = None  # required when the config trains a critic (`config.uses_critic`)
    # the policy model a rollout engine may hold a copy of (`rollout.weights.RolloutWeights`, the rollout worker's);
    # None: the task's rollout is the trainer's policy itself (gym), and the rollout keys must keep their defaults
    rollout_source: nn.Module | None = None
    world_model: WorldModel | None = None  # the optional world-model hook

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """Facts for `run.json`: at least `action_space` and `max_entropy` (the diagnosis reads them)."""

    # ---- one PPO step, in the order the workers call them ----------------------------------------------------
    @abstractmethod
    def generate(self, agents: Sequence[int] | None = None, policy: nn.Module | None = None) -> Batch:
        """Roll out this step's batch with the current policy (the `gen` phase): the `gen` fields of `Batch`.
        `agents=None`: every agent, the start of a step. A list: more rows of the same step for those agents only,
        each from its own streams (dynamic sampling; a task without it may refuse). `policy`: the rollout engine's
        own copy of `rollout_source` to generate with (the rollout worker's); None: the trainer's policy itself."""

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
        assert self.critic is not None, "compute_values is called only when a critic trains"
        batch["values"] = self.critic.values(batch)

    @abstractmethod
    def advantage_inputs(self, batch: Batch) -> dict[str, Tensor | None]:
        """The advantage estimator's tensor inputs in the task's layout of the rows (`algos.advantages`:
        `token_level_rewards`, `response_mask`, and what the task has of `values`, `next_values`, `dones`,
        `index`, `reward_baselines`); the estimator's outputs come back through `advantage_rows`."""

    def advantage_rows(self, x: Tensor) -> Tensor:
        """An estimator's output `(advantages or returns)` in the task's layout, back as the batch's `(K, rows, T)`."""
        return x

    def resume_with(self, spec: Any) -> None:
        """Go on with a resumed run's task settings (the spec `run_spec` resolved from the config after the run's
        `onset_step`): the reward function's and the sampling's. A family that cannot change them mid-run keeps this
        refusal."""
        raise NotImplementedError(f"a {self.family} task cannot change its settings on a resume (onset_step)")

    def watch_memory(self, guard: MemoryCheck) -> None:
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

    def token_texts(self, ids: Sequence[int]) -> list[str]:
        """Each token id's text, specials by name: the step's token records (`trainer.token_records`, token tasks)."""
        raise NotImplementedError(f"{type(self).__name__} has no tokens: trainer.token_records is a token task's")

    def agent_metrics(self, agent: int, step: int) -> dict[str, float]:
        """One agent's metrics that the task keeps itself (episode statistics, the data epoch)."""
        return {}

    @abstractmethod
    def validate(self, policy: nn.Module | None = None) -> dict[str, Tensor]:
        """Validation metrics `(K,)` (`val/*`), run every `trainer.test_freq` steps and at the end; `policy` as in
        `generate` (verl validates on the rollout engine)."""
