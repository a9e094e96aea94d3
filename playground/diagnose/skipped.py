"""The rules a log could not be judged by, and what would have let them run: the metrics the log lacks, the run
fact no one gave (a score target), or more steps (`notes.TooLittleData`). A clean report with half the rules idle
says less than it seems to; this list says which half, and the key that would have woken each."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from playground.diagnose import catalogue
from playground.diagnose.log import Log
from playground.diagnose.notes import TooLittleData

if TYPE_CHECKING:
    from playground.diagnose.series import Series

# where each run fact a rule can need comes from (engine.facts): what to set so that the rule runs
FACT_SOURCES = {
    "score_target": "score_target: task.score_target in the run's config (run.json's score_target)",
    "max_response_length": "max_response_length: pass --max-response-length (data.max_response_length)",
    "max_entropy": "max_entropy: run.json's max_entropy (the action space's)",
    "memory_limit_gb": "memory_limit_gb: run.json's memory_limit_gb",
    "grad_clip": "grad_clip: actor_rollout_ref.actor.grad_clip in the run's config",
}
BUILTIN_FACTS = {"score_gap": "score_target"}  # built-in series unknown without a fact even where the metric is


def _need(series: Series, log: Log) -> str:
    """What a series that has no value at any step lacks: the fact it is computed from, else its metric."""
    fact = BUILTIN_FACTS.get(series.label, series.label)
    if fact in FACT_SOURCES and log.facts.get(fact) is None:
        return FACT_SOURCES[fact]
    return series.metric_name(log)


def _facts_in(spec: Any) -> set[str]:
    """The run facts a series spec reads: `{fact: name}`, and the built-ins computed from one (score_gap)."""
    if isinstance(spec, str):
        return {BUILTIN_FACTS[spec]} if spec in BUILTIN_FACTS else set()
    if isinstance(spec, dict) and isinstance(spec.get("fact"), str):
        return {spec["fact"]}
    items = spec.values() if isinstance(spec, dict) else spec if isinstance(spec, list) else ()
    return set().union(*(_facts_in(item) for item in items))


def _required_facts(when: Any) -> set[str]:
    """The facts a condition cannot hold without: those read by a comparison (with no `missing:` to assume) that is
    one of its `all:` terms. An unknown term of an AND leaves it never true; under `any:` or `not:` it may not."""
    if not isinstance(when, dict):
        return set()
    if "all" in when:
        return set().union(*(_required_facts(term) for term in when["all"]))
    return _facts_in(when["x"]) if "x" in when and "missing" not in when else set()


@functools.lru_cache(maxsize=1)
def required_facts() -> dict[str, frozenset[str]]:
    """rule name -> the facts its condition cannot hold without (rules.yaml)."""
    return {spec["name"]: frozenset(_required_facts(spec["when"])) for spec in catalogue.document()["rules"]}


class RuleLike(Protocol):
    """What this module reads of a compiled rule (`engine.Rule`), named here so the engine can import this module."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def needs(self) -> Sequence[Series]: ...
    @property
    def after_step(self) -> int: ...


def skipped_rule(rule: RuleLike, log: Log, notes: Sequence[str], judged: bool) -> dict | None:
    """A rule that did not run on `log` (None where it ran), as the report lists it: {id, rule, needs, reason};
    `notes` are the rule's own (a `TooLittleData` says it was short of steps), `judged` whether the log gave it
    steps with its metrics. A judged rule did not run either where its condition needs a fact the log lacks."""
    if judged:
        lacking = sorted(f for f in required_facts().get(rule.name, ()) if log.facts.get(f) is None)
        return {"id": rule.id, "rule": rule.name, "reason": "missing_fact",
                "needs": [FACT_SOURCES.get(f, f) for f in lacking]} if lacking else None
    short = next((n for n in notes if isinstance(n, TooLittleData)), None)
    if short is not None:
        return {"id": rule.id, "rule": rule.name, "reason": "too_few_steps",
                "needs": [f"{short.needs} steps with its metrics (the log has {short.steps})"]}
    idle = [s for s in rule.needs if all(s.value(log, i) is None for i in range(log.n))]
    needs = list(dict.fromkeys(_need(s, log) for s in idle))
    if not log.n:
        return {"id": rule.id, "rule": rule.name, "reason": "no_steps", "needs": ["a step with its metrics"]}
    if needs:
        reason = "missing_fact" if all(n in FACT_SOURCES.values() for n in needs) else "missing_metrics"
        return {"id": rule.id, "rule": rule.name, "reason": reason, "needs": needs}
    # every metric is there, never at once (or only before the rule's first step)
    return {"id": rule.id, "rule": rule.name, "reason": "no_step_with_all_metrics",
            "needs": [s.metric_name(log) for s in rule.needs] + ([f"a step >= {rule.after_step}"]
                                                                 if rule.after_step > 0 else [])}


def skipped_line(skipped: Sequence[dict]) -> str | None:
    """The rules that lacked an input, folded into one line by what they need (those short of steps are in the
    notes' own folded line): "not run: 3 rules (score_target: ... for plateau; critic/vf_explained_var for ...)"."""
    lacking = [s for s in skipped if s["reason"] != "too_few_steps"]
    if not lacking:
        return None
    groups: dict[str, list[str]] = {}
    for s in lacking:
        groups.setdefault(", ".join(s["needs"]), []).append(s["rule"])
    parts = [f"{need} for {', '.join(names)}" for need, names in groups.items()]
    return f"not run: {len(lacking)} rule{'s' * (len(lacking) != 1)} lack an input ({'; '.join(parts)})"
