"""When an agent stops, and what happened to it: the stop rules of a run, per agent.

After each logged step an agent stops, in this order of precedence, when its losses stayed non-finite for
`trainer.diverge_patience` steps (`diverged`), its share of the memory passed `trainer.memory_limit_gb` (`oom`), the
finding watcher found `trainer.stop_on_finding`, its score reached `trainer.stop_on_score` (with
`stop_on_score_validated`, the validation's too), or it reached its `trainer.total_training_steps`. An agent that
stops leaves the others of its batch untouched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playground.diagnose.watcher import FindingWatcher, WatchedRun

from playground.metric_names import (
    ACTOR_GRAD_NORM,
    ADVANTAGES_MEAN,
    CRITIC_GRAD_NORM,
    KL_LOSS,
    PG_LOSS,
    VALUES_MEAN,
    VF_LOSS,
)

# Metrics whose non-finite value means the numbers have broken down (training_crash).
CRASH_KEYS = (PG_LOSS, VF_LOSS, ACTOR_GRAD_NORM, CRITIC_GRAD_NORM, KL_LOSS,
              VALUES_MEAN, ADVANTAGES_MEAN)


@dataclass(frozen=True)
class Stop:
    """Why an agent stops: its final status, the error (a failure) or the reason (a planned stop)."""

    status: str  # finished | diverged | oom | failed | interrupted
    error: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class StopSpec:
    """One agent's planned stops (`trainer.stop_on_score`, `stop_on_score_validated`, `stop_on_finding`)."""

    stop_on_score: float | None
    stop_on_score_validated: bool
    stop_on_finding: str | None
    watched: WatchedRun  # what the finding watcher reads of the config


@dataclass(frozen=True)
class AgentOutcome:
    """What happened to one agent of a `Trainer.fit`: how it ended and after how many logged training steps."""

    status: str
    steps: int
    stop_reason: str | None = None
    error: str | None = None


class StopRules:
    """The stop rules of K agents (each with its own state: a non-finite streak, a finding watcher)."""

    def __init__(self, specs: Sequence[StopSpec], total_steps: Sequence[int], diverge_patience: int,
                 score_metric: str, val_score_metric: str | None, facts: dict):
        self.total_steps, self.diverge_patience = list(total_steps), diverge_patience
        self.score_metric, self.val_score_metric = score_metric, val_score_metric
        self.stop_scores = [s.stop_on_score for s in specs]
        self.stop_validated = [s.stop_on_score_validated and val_score_metric is not None for s in specs]
        self.nonfinite_streak = [0] * len(specs)
        self.watchers = [_watcher(s, facts) for s in specs]

    def watch_start(self, agent: int, record: dict[str, float]) -> None:
        """The step-0 validation record: the score the finding watcher starts from, as the full diagnosis reads it."""
        watcher = self.watchers[agent]
        if watcher is not None:
            watcher.update(record)

    def check(self, agent: int, step: int, record: dict[str, float], over_memory: bool) -> Stop | None:
        """Whether agent `agent` stops after logging `record` at `step`: why, or None to go on."""
        crashed = any(key in record and record[key] != record[key] or abs(record.get(key, 0.0)) == float("inf")
                      for key in CRASH_KEYS)
        self.nonfinite_streak[agent] = self.nonfinite_streak[agent] + 1 if crashed else 0
        watcher = self.watchers[agent]
        if self.nonfinite_streak[agent] >= self.diverge_patience:
            return Stop("diverged", error=f"losses stayed non-finite for {self.nonfinite_streak[agent]} steps")
        if over_memory:
            return Stop("oom", error="out of memory: this agent's share passed trainer.memory_limit_gb")
        if watcher is not None and watcher.update(record):
            return Stop("finished", reason=f"stop_on_finding: {watcher.finding_id} found")
        if self.reached_score(agent, record) and self._validated(agent, record):
            validated = f" and {self.val_score_metric}" if self.stop_validated[agent] else ""
            return Stop("finished", reason=f"stop_on_score: {self.score_metric}{validated} reached "
                                           f"{self.stop_scores[agent]}")
        if step >= self.total_steps[agent]:
            return Stop("finished", reason="total_training_steps reached")
        return None

    def reached_score(self, agent: int, record: dict[str, float]) -> bool:
        target = self.stop_scores[agent]
        return target is not None and record.get(self.score_metric, -float("inf")) >= target

    def _validated(self, agent: int, record: dict[str, float]) -> bool:
        """With `stop_on_score_validated`, the validation run at this step must reach the target too."""
        if not self.stop_validated[agent] or self.val_score_metric is None:  # (stop_validated: a metric to check)
            return True
        target = self.stop_scores[agent]
        return target is not None and record.get(self.val_score_metric, -float("inf")) >= target


def _watcher(spec: StopSpec, facts: Mapping[str, Any]) -> FindingWatcher | None:
    if spec.stop_on_finding is None:
        return None
    from playground.diagnose.watcher import FindingWatcher

    return FindingWatcher(spec.stop_on_finding, spec.watched, task_facts=facts)
