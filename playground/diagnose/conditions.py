"""The interpreter of the rule vocabulary in `rules.yaml`: step predicates and window conditions over series.

`compile_condition` turns a rule's YAML into objects evaluated on a run's `Log` (log.py); the series they read are
`series.py`'s (`compile_series`, `Series`, re-exported here). Unknown values stay unknown (None) through three-valued
logic.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from playground.diagnose.log import Log
from playground.diagnose.node import Node
from playground.diagnose.robust import Z_SIGNIFICANT, mann_kendall_z, theil_sen_change
from playground.diagnose.series import Series, compile_series
from playground.diagnose.shapes import FallsFromPeak, Logged, Plateau, Spikes
from playground.metrics import fmt

__all__ = ["Node", "Series", "compile_condition", "compile_series"]

_OPS: dict[str, tuple[str, Callable[[float, float], bool]]] = {
    "lt": ("<", lambda a, b: a < b), "le": ("<=", lambda a, b: a <= b), "gt": (">", lambda a, b: a > b),
    "ge": (">=", lambda a, b: a >= b), "eq": ("==", lambda a, b: a == b),
}


# ---- conditions ------------------------------------------------------------------------------------------
def _all(values: Iterable[bool | None]) -> bool | None:
    """Three-valued AND: False wins, then unknown (None), then True."""
    seen_unknown = False
    for v in values:
        if v is False:
            return False
        seen_unknown |= v is None
    return None if seen_unknown else True


def _negate(value: bool | None) -> bool | None:
    return None if value is None else not value


def _any(values: Iterable[bool | None]) -> bool | None:
    """Three-valued OR, by De Morgan: True wins, then unknown, then False."""
    return _negate(_all(_negate(v) for v in values))


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
    """{nonfinite: [...]}: one is NaN/Inf; {finite: [...]}: every one logged is finite; {zero: [...]}: all exactly 0.
    None where none is logged, unless `missing` says what to assume."""

    def __init__(self, kind: str, metrics: list[str], missing: bool | None = None):
        self.kind, self.metrics, self.missing = kind, metrics, missing

    def at(self, log: Log, i: int) -> bool | None:
        values = [v for m in self.metrics if (v := log.get(m, i)) is not None]
        if not values:
            return self.missing
        if self.kind == "nonfinite":
            return any(not math.isfinite(v) for v in values)
        if self.kind == "finite":
            return all(math.isfinite(v) for v in values)
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

    def _join(self, values: Iterable[bool | None]) -> bool | None:
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
    """drop | rising | not_rising | swing | spike | falls_then_rises of a series over the window; improving |
    not_improving of it over the whole log (a finished run: all of it; a run being watched: so far), whatever the
    window;
    not_improving_since from the window's first step to the log's end (what followed the window)."""

    MIN_VALUES = {"drop": 2, "rising": 3, "not_rising": 3, "swing": 3, "spike": 3, "falls_then_rises": 5,
                  "improving": 3, "not_improving": 3, "not_improving_since": 3, "trend_up": 5, "trend_down": 5}
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
        """drop: the fraction lost; rising: the rise in units of its scale; swing: mean |change|; spike: the
        window's largest value over its median (unknown where the median is 0: a window mostly without the quantity
        has no level to spike from); falls_then_rises: how far both ends sit above the minimum, relative to it."""
        n = len(values)
        if n < self.MIN_VALUES[self.kind]:
            return None
        if self.kind == "spike":
            # the median, not the mean: the spike itself must not raise the level it is measured against
            middle = statistics.median(values)
            return max(values) / middle if middle > 0 else None
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
        if self.kind in ("trend_up", "trend_down"):
            # a monotone trend (Mann-Kendall, 5 % one-sided) whose robust line (Theil-Sen) moves by the size asked;
            # the sign says the direction: trend_down measures the fall
            sign = 1.0 if self.kind == "trend_up" else -1.0
            if sign * mann_kendall_z(values) <= Z_SIGNIFICANT:
                return 0.0
            return sign * theil_sen_change(values) / max(scale, 1e-12)
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
                "spike": "peaks above its median by a factor >",
                "falls_then_rises": "falls, then rises by >", "improving": "has risen since the start by >",
                "not_improving": "has risen since the start by <=",
                "not_improving_since": "has risen since the window's start by <=",
                "trend_up": "rises steadily (Mann-Kendall, Theil-Sen) by >",
                "trend_down": "falls steadily (Mann-Kendall, Theil-Sen) by >"}[self.kind]
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
        step = log.steps[idx[-1]] if idx else 0
        rows = [{"metric": "run.json status", "step": step, "value": log.facts.get("status"),
                 "range": f"not {' / '.join(self.statuses)}", "status": "bad"}]
        if log.facts.get("error"):  # how it ended: the exception's own line (a console log's traceback)
            rows.append({"metric": "exception", "step": step, "value": log.facts["error"],
                         "range": "the run ended on this exception", "status": "bad"})
        return rows


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
    for kind in ("nonfinite", "finite", "zero"):
        if kind in spec:
            return MetricSet(kind, list(spec[kind]), spec.get("missing"))
    if "frac" in spec:
        return Frac(sub(spec["frac"]), _number(spec["ge"], thresholds)[0])
    if "spikes" in spec:
        return Spikes(compile_series(spec["spikes"], defs), *_number(spec["gt"], thresholds),
                      int(_number(spec.get("count", 1), thresholds)[0]))
    if "logged" in spec:
        return Logged(compile_series(spec["logged"], defs), *_number(spec["ge"], thresholds))
    if "plateau" in spec:
        heldout = compile_series(spec["heldout"], defs) if "heldout" in spec else None
        return Plateau(compile_series(spec["plateau"], defs), *_number(spec["share"], thresholds), heldout)
    if "falls_from_peak" in spec:
        rising = compile_series(spec["while"], defs) if "while" in spec else None
        return FallsFromPeak(compile_series(spec["falls_from_peak"], defs), *_number(spec["by"], thresholds), rising,
                             spec.get("of", "peak"), spec.get("missing"))
    for kind, key in (("drop", "gt"), ("swing", "gt"), ("spike", "gt"), ("rising", "by"), ("not_rising", "by"),
                      ("improving", "by"), ("not_improving", "by"), ("not_improving_since", "by"),
                      ("falls_then_rises", "by"), ("trend_up", "by"), ("trend_down", "by")):
        if kind in spec:
            number, text = _number(spec.get(key, 0.05), thresholds)
            return Trend(kind, compile_series(spec[kind], defs), number, text)
    if "status" in spec:
        return Status(list(spec["status"]))
    raise ValueError(f"rules.yaml: unknown condition {spec!r}")
