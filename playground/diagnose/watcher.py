"""A finding watched for while a run trains (`trainer.stop_on_finding=<id>`): the engine's rules judged on each new
step's windows, so that the trainer can stop as soon as the finding appears."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from playground import failures
from playground.diagnose.engine import diagnose_log, evaluate, facts, resolve_family, rules
from playground.diagnose.log import Log
from playground.metrics import canonicalize


@dataclass(frozen=True)
class WatchedRun:
    """What a finding watcher knows of its run's config (`run_spec` resolves it): the facts the rules read from a
    config (`facts`); the task's own (`Task.describe`) come beside it."""

    family: str  # task.family
    score_target: float  # task.score_target
    grad_clip: float | None  # actor_rollout_ref.actor.grad_clip (None: not clipped)
    max_response_length: int | None  # data.max_response_length (None: no cap to check responses against)
    total_steps: int  # trainer.total_training_steps (what a verdict on a run too short to judge says it was to have)


class FindingWatcher:
    """Tells the trainer when one finding appears (`trainer.stop_on_finding=<id>`).

    Each `update` judges only the windows ending at the new step, so it stays cheap on long runs;
    `healthy` (a verdict on the whole run) is re-diagnosed every `HEALTHY_EVERY` steps.
    """

    HEALTHY_EVERY = 10

    def __init__(self, finding_id: str, run: WatchedRun, task_facts: Mapping[str, Any] | None = None):
        if finding_id not in failures.FAILURE_IDS:
            raise ValueError(f"unknown finding id {finding_id!r}: one of {failures.FAILURE_IDS}")
        self.finding_id = finding_id
        info = {**(task_facts or {}), "family": run.family, "score_target": run.score_target,
                "grad_clip_actor": run.grad_clip, "max_response_length": run.max_response_length,
                "total_steps": run.total_steps}
        self.family = resolve_family(None, info, None)
        self.log = Log(facts(info, None, self.family))
        self.rules = [r for r in rules(self.family) if r.id == finding_id and r.kind != "run"]
        self.found = False

    def update(self, record: Mapping[str, float]) -> bool:
        """Add one step's record; True once the finding has appeared."""
        if self.found:
            return True
        self.log.append(canonicalize(record))
        if self.finding_id == "healthy":
            if self.log.n % self.HEALTHY_EVERY == 0:
                # only the ids are read: no config, so the fixes (never shown) name no current values
                self.found = "healthy" in diagnose_log(self.log, self.family).ids()
        else:
            self.found = any(evaluate(rule, self.log, last_only=True)[0] for rule in self.rules)
        return self.found
