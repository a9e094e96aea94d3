"""The interpreter of the rule vocabulary in `rules.yaml`: series, step predicates and window conditions.

`compile_series` and `compile_condition` turn a rule's YAML into objects evaluated on a run's `Log` (log.py).
Unknown values stay unknown (None) through three-valued logic.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from playground.diagnose.log import Log
from playground.metrics import fmt

# The policy's entropy: verl V1 logs the pre-update entropy every step (`actor/entropy`) and the in-update entropy only
# when the update computes it (`actor/entropy_loss`); the guide, the playground and verl <= 0.3 name the quantity
# `actor/entropy_loss`. The first of these a log holds is read.
ENTROPY_KEYS = ("actor/entropy", "actor/entropy_loss")
_OPS: dict[str, tuple[str, Callable[[float, float], bool]]] = {
    "lt": ("<", lambda a, b: a < b), "le": ("<=", lambda a, b: a <= b), "gt": (">", lambda a, b: a > b),
    "ge": (">=", lambda a, b: a >= b), "eq": ("==", lambda a, b: a == b),
}


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
    declared = log.facts.get("score_metric")  # run.json: what the task's score_target is measured on
    if declared and declared in log.cols:
        return declared
    if log.facts.get("family") == "token" or "critic/score/mean" not in log.cols:
        return "val/score"  # token tasks: greedy validation; sampled train reward stays far below it
    return "critic/score/mean"


def _score(log: Log, i: int) -> float | None:
    return log.get(_score_key(log), i)


def _score_gap(log: Log, i: int) -> float | None:
    target, score = log.facts.get("score_target"), _score(log, i)
    if target is None or score is None:
        return None
    return (target - score) / max(abs(target), 1.0)


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
    "entropy": Series(_entropy, "entropy", _entropy_key, _entropy_key),  # evidence names the key read
    "rel_entropy": Series(_rel_entropy, "rel_entropy", _entropy_key, _rel_entropy_label),
    "entropy_spread": Series(_entropy_spread, "entropy_spread", _entropy_key, _spread_label),
}


def _unary(s: Series, fn: Callable[[float], float], label: str) -> Series:
    return Series(lambda log, i: None if (v := s.value(log, i)) is None else fn(v), label, s._metric)


def compile_series(spec: Any, defs: Mapping[str, Any]) -> Series:
    """A series from its YAML spec (see `rules.yaml`)."""
    if isinstance(spec, str):
        if spec in BUILTIN:
            return BUILTIN[spec]
        if spec in defs:
            inner = compile_series(defs[spec], defs)
            return Series(inner.fn, spec, inner._metric)
        return Series(lambda log, i: log.get(spec, i), spec, spec)
    if "abs" in spec:
        s = compile_series(spec["abs"], defs)
        return _unary(s, abs, f"|{s.label}|")
    if "fact" in spec:
        name = spec["fact"]
        return Series(lambda log, i: log.facts.get(name), name, name)
    if "first" in spec:
        parts = [compile_series(p, defs) for p in spec["first"]]

        def first(log: Log, i: int) -> float | None:
            return next((v for p in parts if (v := p.value(log, i)) is not None), None)

        return Series(first, " or ".join(p.label for p in parts),
                      lambda log: next((p.metric_name(log) for p in parts if p.metric_name(log) in log.cols),
                                       parts[0].metric_name(log)))
    if "diff" in spec:
        a, b = (compile_series(p, defs) for p in spec["diff"])

        def diff(log: Log, i: int) -> float | None:
            va, vb = a.value(log, i), b.value(log, i)
            return None if va is None or vb is None else va - vb

        return Series(diff, f"{a.label} - {b.label}", a._metric)
    if "ratio" in spec:
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
    raise ValueError(f"rules.yaml: unknown series {spec!r}")


# ---- conditions ------------------------------------------------------------------------------------------
def _all(values) -> bool | None:
    """Three-valued AND: False wins, then unknown (None), then True."""
    seen_unknown = False
    for v in values:
        if v is False:
            return False
        seen_unknown |= v is None
    return None if seen_unknown else True


def _negate(value: bool | None) -> bool | None:
    return None if value is None else not value


def _any(values) -> bool | None:
    """Three-valued OR, by De Morgan: True wins, then unknown, then False."""
    return _negate(_all(_negate(v) for v in values))


class Node:
    """A condition. `at(log, i)`: a step predicate at record i; `over(log, idx)`: judged on a window."""

    def at(self, log: Log, i: int) -> bool | None:
        raise TypeError(f"{type(self).__name__} is a window condition, not a step predicate")

    def over(self, log: Log, idx: Sequence[int]) -> bool | None:
        return self.at(log, idx[-1]) if idx else None

    def evidence(self, log: Log, idx: Sequence[int]) -> list[dict]:
        return []


class Leaf(Node):
    def __init__(self, series: Series, op: str, value: float, text: str, missing: bool | None):
        self.series, self.op, self.value, self.text, self.missing = series, op, value, text, missing

    def at(self, log: Log, i: int) -> bool | None:
        key = (self, i)
        if key not in log.memo:
            v = self.series.value(log, i)
            log.memo[key] = self.missing if v is None else _OPS[self.op][1](v, self.value)
        return log.memo[key]

    def evidence(self, log: Log, idx: Sequence[int]) -> list[dict]:
        i = idx[-1]
        v = self.series.value(log, i)
        if v is None:
            return []
        holds = self.at(log, i)
        metric = self.series.metric_name(log)
        raw = log.get(metric, i)
        text = f"{self.series.label_for(log)} {_OPS[self.op][0]} {self.text}"
        if raw is None or abs(v - raw) > 1e-12 * max(1.0, abs(raw)):  # derived: show the value judged too
            text += f" (here {fmt(v)})"
        return [{"metric": metric, "step": log.steps[i], "value": v if raw is None else raw, "range": text,
                 "status": None if holds is None else ("bad" if holds else "ok")}]


class MetricSet(Node):
    """{nonfinite: [...]}: one is NaN/Inf; {zero: [...]}: all exactly 0."""

    def __init__(self, kind: str, metrics: list[str]):
        self.kind, self.metrics = kind, metrics

    def at(self, log: Log, i: int) -> bool | None:
        values = [v for m in self.metrics if (v := log.get(m, i)) is not None]
        if not values:
            return None
        if self.kind == "nonfinite":
            return any(not math.isfinite(v) for v in values)
        return len(values) == len(self.metrics) and all(v == 0 for v in values)

    def evidence(self, log: Log, idx: Sequence[int]) -> list[dict]:
        if self.kind != "nonfinite":
            return []
        i = idx[-1]
        return [{"metric": m, "step": log.steps[i], "value": v, "range": "finite", "status": "bad"}
                for m in self.metrics if (v := log.get(m, i)) is not None and not math.isfinite(v)]


class Combine(Node):
    def __init__(self, kind: str, children: list[Node]):
        self.kind, self.children = kind, children

    def _join(self, values) -> bool | None:
        if self.kind == "not":
            return _negate(next(iter(values)))
        return _all(values) if self.kind == "all" else _any(values)

    def at(self, log: Log, i: int) -> bool | None:
        return self._join(c.at(log, i) for c in self.children)

    def over(self, log: Log, idx: Sequence[int]) -> bool | None:
        return self._join(c.over(log, idx) for c in self.children)

    def evidence(self, log: Log, idx: Sequence[int]) -> list[dict]:
        return [] if self.kind == "not" else [e for c in self.children for e in c.evidence(log, idx)]


class Frac(Node):
    def __init__(self, pred: Node, ge: float):
        self.pred, self.ge = pred, ge

    def _counts(self, log: Log, idx: Sequence[int]) -> tuple[int, int]:
        values = [self.pred.at(log, i) for i in idx]
        return sum(v is True for v in values), sum(v is not None for v in values)

    def over(self, log: Log, idx: Sequence[int]) -> bool | None:
        hits, known = self._counts(log, idx)
        return None if known == 0 else hits / known >= self.ge

    def evidence(self, log: Log, idx: Sequence[int]) -> list[dict]:
        hits, known = self._counts(log, idx)
        held = [i for i in idx if self.pred.at(log, i) is True]
        items = self.pred.evidence(log, [held[-1] if held else idx[-1]])
        for item in items:
            item["range"] += f" at {hits}/{known} steps (needs {self.ge:.0%})"
        return items


class Trend(Node):
    """drop | rising | not_rising | swing | falls_then_rises of a series over the window; improving | not_improving
    of it over the whole log (a finished run: all of it; a run being watched: so far), whatever the window;
    not_improving_since from the window's first step to the log's end (what followed the window)."""

    MIN_VALUES = {"drop": 2, "rising": 3, "not_rising": 3, "swing": 3, "falls_then_rises": 5, "improving": 3,
                  "not_improving": 3, "not_improving_since": 3}
    NEGATED = ("not_rising", "not_improving", "not_improving_since")  # true when unknown: "not shown to rise"
    FIFTHS = ("drop", "falls_then_rises", "improving", "not_improving", "not_improving_since")  # compare fifths

    def __init__(self, kind: str, series: Series, value: float, text: str):
        self.kind, self.series, self.value, self.text = kind, series, value, text

    def _values(self, log: Log, idx: Sequence[int]) -> list[float]:
        if self.kind in ("improving", "not_improving"):
            idx = range(log.n)
        elif self.kind == "not_improving_since":
            idx = range(idx[0], log.n) if len(idx) else idx
        log.reading_shape = True
        try:
            return [v for i in idx if (v := self.series.value(log, i)) is not None and math.isfinite(v)]
        finally:
            log.reading_shape = False

    def measure(self, log: Log, values: list[float]) -> float | None:
        """drop: the fraction lost; rising: the rise in units of its scale; swing: mean |change|;
        falls_then_rises: how far both ends sit above the minimum, relative to it."""
        n = len(values)
        if n < self.MIN_VALUES[self.kind]:
            return None
        # whole-run and falling measures compare fifths (the run's start and end); window rises compare thirds
        k = max(1, n // (5 if self.kind in self.FIFTHS else 3))
        a, b = sum(values[:k]) / k, sum(values[-k:]) / k
        if self.kind == "drop":
            return None if a <= 0 else 1 - b / a
        if self.kind == "swing":
            return sum(abs(y - x) for x, y in zip(values[:-1], values[1:], strict=True)) / (n - 1)
        if self.kind == "falls_then_rises":
            low = min(values)
            inside = k <= values.index(low) < n - k
            return min(a, b) / low - 1 if inside and low > 0 else 0.0
        target = log.facts.get("score_target") if self.series.label == "score" else None
        # the distance left to the target, at least 5% of the target's size (a window that starts on the target
        # still has a scale)
        scale = max(abs(target - a), 0.05 * max(abs(target), 1.0)) if target is not None else abs(a)
        return (b - a) / max(scale, 1e-12)

    def over(self, log: Log, idx: Sequence[int]) -> bool | None:
        m = self.measure(log, self._values(log, idx))
        if m is None:
            return True if self.kind in self.NEGATED else None
        holds = m > self.value
        return not holds if self.kind in self.NEGATED else holds

    def evidence(self, log: Log, idx: Sequence[int]) -> list[dict]:
        values = self._values(log, idx)
        if not values:
            return []
        m = self.measure(log, values)
        step, metric = log.steps[idx[-1]], self.series.metric_name(log)
        if m is None:
            return [{"metric": metric, "step": step, "value": values[-1], "status": None,
                     "range": f"{self.series.label_for(log)} trend: too few values to tell ({len(values)})"}]
        word = {"drop": "falls by >", "rising": "rises by >", "not_rising": "rises by <=", "swing": "swings by >",
                "falls_then_rises": "falls, then rises by >", "improving": "has risen since the start by >",
                "not_improving": "has risen since the start by <=",
                "not_improving_since": "has risen since the window's start by <="}[self.kind]
        holds = self.over(log, idx)
        raw = log.get(metric, idx[-1])
        return [{"metric": metric, "step": step, "value": values[-1] if raw is None else raw,
                 "range": f"{self.series.label_for(log)} {word} {self.text} over {len(values)} steps (here {fmt(m)})",
                 "status": None if holds is None else ("bad" if holds else "ok")}]


class Status(Node):
    def __init__(self, statuses: list[str]):
        self.statuses = statuses

    def over(self, log: Log, idx: Sequence[int]) -> bool | None:
        status = log.facts.get("status")
        return None if status is None else status in self.statuses

    def at(self, log: Log, i: int) -> bool | None:
        return self.over(log, [i])

    def evidence(self, log: Log, idx: Sequence[int]) -> list[dict]:
        return [{"metric": "run.json status", "step": log.steps[idx[-1]] if idx else 0,
                 "value": log.facts.get("status"), "range": f"not {' / '.join(self.statuses)}", "status": "bad"}]


def _number(value: Any, thresholds: Mapping[str, tuple[float, str]]) -> tuple[float, str]:
    """A literal, `$name` or `-$name`, with how evidence writes it."""
    if isinstance(value, str) and value.lstrip("-").startswith("$"):
        sign = -1.0 if value.startswith("-") else 1.0
        number, text = thresholds[value.lstrip("-")[1:]]
        return sign * number, ("-" if sign < 0 else "") + text
    return float(value), fmt(float(value))


def compile_condition(spec: Any, defs: Mapping[str, Any], thresholds: Mapping[str, tuple[float, str]],
                      guards: Mapping[str, Any] | None = None) -> Node:
    """A step predicate or window condition from its YAML spec (see `rules.yaml`); `guards`: the named conditions
    a spec may use as `{guard: name}`."""
    guards = guards or {}

    def sub(s: Any) -> Node:
        return compile_condition(s, defs, thresholds, guards)

    if "guard" in spec:
        if spec["guard"] not in guards:
            raise ValueError(f"rules.yaml: unknown guard {spec['guard']!r}: one of {sorted(guards)}")
        return sub(guards[spec["guard"]])
    for kind in ("all", "any"):
        if kind in spec:
            return Combine(kind, [sub(s) for s in spec[kind]])
    if "not" in spec:
        return Combine("not", [sub(spec["not"])])
    if "last" in spec:
        return sub(spec["last"])
    if "x" in spec:
        op = next(o for o in _OPS if o in spec)
        number, text = _number(spec[op], thresholds)
        return Leaf(compile_series(spec["x"], defs), op, number, text, spec.get("missing"))
    for kind in ("nonfinite", "zero"):
        if kind in spec:
            return MetricSet(kind, list(spec[kind]))
    if "frac" in spec:
        return Frac(sub(spec["frac"]), _number(spec["ge"], thresholds)[0])
    for kind, key in (("drop", "gt"), ("swing", "gt"), ("rising", "by"), ("not_rising", "by"), ("improving", "by"),
                      ("not_improving", "by"), ("not_improving_since", "by"), ("falls_then_rises", "by")):
        if kind in spec:
            number, text = _number(spec.get(key, 0.05), thresholds)
            return Trend(kind, compile_series(spec[kind], defs), number, text)
    if "status" in spec:
        return Status(list(spec["status"]))
    raise ValueError(f"rules.yaml: unknown condition {spec!r}")
