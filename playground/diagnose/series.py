"""The series of the rule vocabulary in `rules.yaml`: a value per step, read from a metric, a run fact or built in
(the score, the entropy and their derived values), and `compile_series`, which builds one from its YAML spec.

`conditions` judges predicates and window conditions on them; both evaluate on a run's `Log` (log.py), unknown values
staying unknown (None).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from playground.diagnose.log import Log
from playground.diagnose.node import Form, form_of
from playground.metric_names import ENTROPY, ENTROPY_LOSS, SCORE, SCORE_MEAN
from playground.metrics import fmt
from playground.rundir.score import score_metric

# The policy's entropy: verl V1 logs the pre-update entropy every step (`actor/entropy`) and the in-update entropy only
# when the update computes it (`actor/entropy_loss`); the guide, the playground and verl <= 0.3 name the quantity
# `actor/entropy_loss`. The first of these a log holds is read.
ENTROPY_KEYS = (ENTROPY, ENTROPY_LOSS)


class Series:
    """A value per step: a metric, or one computed from metrics and facts."""

    def __init__(self, fn: Callable[[Log, int], float | None], label: str, metric: str | Callable[[Log], str],
                 label_fn: Callable[[Log], str] | None = None):
        self.fn, self.label, self._metric, self._label_fn = fn, label, metric, label_fn

    def value(self, log: Log, i: int) -> float | None:
        return self.fn(log, i)

    def metric_name(self, log: Log) -> str:
        """The metric a reader should look at for this series."""
        return self._metric(log) if callable(self._metric) else self._metric

    def label_for(self, log: Log) -> str:
        """How evidence names the series (a built-in may say what it computed for this run)."""
        return self._label_fn(log) if self._label_fn else self.label

    def describe(self, log: Log) -> str:
        metric, label = self.metric_name(log), self.label_for(log)
        return metric if label == metric else f"{label} ({metric})"


def _score_key(log: Log) -> str:
    return score_metric(log.facts, log.cols)  # the one definition of a run's score (sweeper, explorer, workshop)


def _score(log: Log, i: int) -> float | None:
    return log.get(_score_key(log), i)


def _score_gap(log: Log, i: int) -> float | None:
    target, score = log.facts.get("score_target"), _score(log, i)
    if target is None or score is None:
        return None
    return (target - score) / max(abs(target), 1.0)


def _score_headroom(log: Log, i: int) -> float | None:
    """Where no target is known (a verl log): how far the batch's mean score sits below its best sample, as a share
    of the batch's score range, (critic/score/max - mean) / (max - min): near 0 when almost every sample earns the
    best score there is. Unknown with a target (it says how high is high), or where every sample scored alike."""
    if log.facts.get("score_target") is not None:
        return None
    top, low, mean = (log.get(f"{SCORE}/{k}", i) for k in ("max", "min", "mean"))
    if top is None or low is None or mean is None or top <= low:
        return None
    return (top - mean) / (top - low)


def _entropy_key(log: Log) -> str:
    return next((k for k in ENTROPY_KEYS if k in log.cols), ENTROPY_KEYS[-1])


def _entropy(log: Log, i: int) -> float | None:
    return log.get(_entropy_key(log), i)


def _continuous(log: Log) -> bool:
    return log.facts.get("action_space") == "continuous"


def _rel_entropy(log: Log, i: int) -> float | None:
    h = _entropy(log, i)
    if h is None:
        return None
    if _continuous(log):
        first = log.first(_entropy_key(log))
        return None if first is None else math.exp(min(h - first, 50.0))
    top = log.facts.get("max_entropy")
    return h / top if top else h


def _entropy_spread(log: Log, i: int) -> float | None:
    h = _entropy(log, i)
    if h is None:
        return None
    return math.exp(min(h, 50.0)) if _continuous(log) else h


def _rel_entropy_label(log: Log) -> str:
    if _continuous(log):
        return "exp(entropy - first entropy)"
    return "entropy / max_entropy" if log.facts.get("max_entropy") else "entropy in nats (max_entropy unknown)"


def _spread_label(log: Log) -> str:
    return "exp(entropy)" if _continuous(log) else "entropy"


BUILTIN: dict[str, Series] = {
    "score": Series(_score, "score", _score_key),
    "score_gap": Series(_score_gap, "score_gap", _score_key,
                        lambda log: f"(score_target {fmt(log.facts.get('score_target'), none='unknown')} - score) / "
                                    f"max(|score_target|, 1)"),
    "score_headroom": Series(_score_headroom, "score_headroom", SCORE_MEAN,
                             lambda log: "(critic/score/max - mean) / (max - min)"),
    "entropy": Series(_entropy, "entropy", _entropy_key, _entropy_key),  # evidence names the key read
    "rel_entropy": Series(_rel_entropy, "rel_entropy", _entropy_key, _rel_entropy_label),
    "entropy_spread": Series(_entropy_spread, "entropy_spread", _entropy_key, _spread_label),
}
# what each built-in is, as rules.yaml's header says it (they need the run's facts)
BUILTIN_DOC: dict[str, str] = {
    "score": "val/score on token tasks (greedy), else critic/score/mean (else val/score): rundir.score's",
    "score_gap": "(score_target - score) / max(|score_target|, 1); unknown without a target",
    "score_headroom": "no target known (a verl log): (critic/score/max - mean) / (max - min) of the batch's scores, "
                      "near 0 where almost every sample earns the best score there is; unknown with a target, or "
                      "where every sample scored alike",
    "entropy": "actor/entropy (verl V1's pre-update entropy, logged every step) where the log has it, else "
               "actor/entropy_loss (the guide's name; V1: the entropy during the update, when computed)",
    "rel_entropy": "entropy / max_entropy (discrete); exp(H - H_first) for continuous actions (differential entropy: "
                   "the change counts, not the value); plain entropy in nats when the maximum is unknown (verl logs: "
                   "the guide's own numbers are in nats)",
    "entropy_spread": "entropy (discrete), exp(entropy) (continuous): its relative fall is the spread lost",
}


def _unary(s: Series, fn: Callable[[float], float], label: str) -> Series:
    return Series(lambda log, i: None if (v := s.value(log, i)) is None else fn(v), label, s._metric)


def _start(s: Series) -> Series:
    """The series' first finite value in the log, at every step: where a run began (a validation before training
    is the base's)."""
    key = f"start of {s.label}"
    return Series(lambda log, i: log.first(key, lambda j: s.value(log, j)), key, s._metric)


def _peak(s: Series) -> Series:
    """The series' largest finite value in the log, at every step (the log as read so far)."""
    key = f"peak of {s.label}"

    def peak(log: Log, i: int) -> float | None:
        if (key, -1) not in log.memo:
            values = [v for j in range(log.n) if (v := s.value(log, j)) is not None and math.isfinite(v)]
            log.memo[(key, -1)] = max(values) if values else None
        return log.memo[(key, -1)]

    return Series(peak, key, s._metric)


def compile_series(spec: Any, defs: Mapping[str, Any]) -> Series:
    """A series from its YAML spec: a number, a name (built in, `series:`'s, else a metric) or one of `FORMS`
    (rules.yaml's header lists them)."""
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):  # a constant: a fallback in {first: [...]}
        return Series(lambda log, i: float(spec), fmt(float(spec)), fmt(float(spec)))
    if isinstance(spec, str):
        if spec in BUILTIN:
            return BUILTIN[spec]
        if spec in defs:
            inner = compile_series(defs[spec], defs)
            return Series(inner.fn, spec, inner._metric)
        return Series(lambda log, i: log.get(spec, i), spec, spec)
    return form_of(spec, FORMS, "series").build(spec, defs)


def _abs(spec: Mapping[str, Any], defs: Mapping[str, Any]) -> Series:
    s = compile_series(spec["abs"], defs)
    return _unary(s, abs, f"|{s.label}|")


def _fact(spec: Mapping[str, Any], defs: Mapping[str, Any]) -> Series:
    name = spec["fact"]
    return Series(lambda log, i: log.facts.get(name), name, name)


def _first(spec: Mapping[str, Any], defs: Mapping[str, Any]) -> Series:
    parts = [compile_series(p, defs) for p in spec["first"]]

    def first(log: Log, i: int) -> float | None:
        return next((v for p in parts if (v := p.value(log, i)) is not None), None)

    return Series(first, " or ".join(p.label for p in parts),
                  lambda log: next((p.metric_name(log) for p in parts if p.metric_name(log) in log.cols),
                                   parts[0].metric_name(log)))


def _diff(spec: Mapping[str, Any], defs: Mapping[str, Any]) -> Series:
    a, b = (compile_series(p, defs) for p in spec["diff"])

    def diff(log: Log, i: int) -> float | None:
        va, vb = a.value(log, i), b.value(log, i)
        return None if va is None or vb is None else va - vb

    return Series(diff, f"{a.label} - {b.label}", a._metric)


def _ratio(spec: Mapping[str, Any], defs: Mapping[str, Any]) -> Series:
    a, b = (compile_series(p, defs) for p in spec["ratio"])
    floor = float(spec.get("floor", 0.0))

    def ratio(log: Log, i: int) -> float | None:
        va, vb = a.value(log, i), b.value(log, i)
        if va is None or vb is None:
            return None
        denominator = math.copysign(max(abs(vb), floor), vb)
        return None if denominator == 0 else va / denominator

    label = f"{a.label} / {'max(' + b.label + f', {fmt(floor)})' if floor else b.label}"
    return Series(ratio, label, a._metric)


FORMS: dict[str, Form] = {form.head: form for form in [
    Form("abs", "{abs: s}", "|s|", _abs),
    Form("diff", "{diff: [a, b]}", "a - b", _diff),
    Form("ratio", "{ratio: [a, b], floor: f}", "a / b, with |b| raised to at least f (default 0)", _ratio,
         optional=("floor",)),
    Form("first", "{first: [a, b, ...]}", "the first of them known at the step", _first),
    Form("fact", "{fact: name}", "a run fact (grad_clip, memory_limit_gb, max_response_length, ...), at every step",
         _fact),
    Form("start", "{start: s}", "s's first known value in the log, at every step: where the run began",
         lambda spec, defs: _start(compile_series(spec["start"], defs))),
    Form("peak", "{peak: s}", "s's largest finite value in the log (as read so far), at every step",
         lambda spec, defs: _peak(compile_series(spec["peak"], defs))),
]}
