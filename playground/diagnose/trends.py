"""The trend operators of the rule vocabulary: one class each, in `TRENDS` by the name a rule writes
(`{rising: score, by: 0.05}`), each with what it measures of a series' values; `Trend` is the condition that judges
one of them on a rule's window (or the whole log).

An operator's doc is what rules.yaml's header says of it (grammar.py); the fewest values it measures and the sizes it
falls back on are tunables.yaml's `trend` section.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar

from playground.diagnose.log import Log
from playground.diagnose.node import Node
from playground.diagnose.robust import mann_kendall_z, theil_sen_change
from playground.diagnose.series import Series
from playground.diagnose.tunables import TUNABLES
from playground.metrics import fmt


def _ends(values: list[float], parts: int) -> tuple[float, float]:
    """The means of the first and the last `parts`-th of the values (at least one value each)."""
    k = max(1, len(values) // parts)
    return sum(values[:k]) / k, sum(values[-k:]) / k


class TrendOp:
    """A trend operator: `measure` of the finite values it reads, compared with the rule's size (greater: it holds)."""

    name: ClassVar[str]
    size_key: ClassVar[str] = "by"  # the key of the size a rule judges it by
    # the values it reads: the window's; "log": the whole log's, whatever the window (a run being watched: so far);
    # "since": from the window's first step to the log's end
    span: ClassVar[str] = "window"
    negated: ClassVar[bool] = False  # holds where the measure is not above the size, and where it is unknown
    word: ClassVar[str]  # how evidence says it: "<series> <word> <size> over <n> steps"

    def measure(self, values: list[float], scale: Callable[[float], float]) -> float | None:
        """The measure of at least `trend.min_values` values; `scale(a)`: the series' scale seen from a start a."""
        raise NotImplementedError


class Drop(TrendOp):
    """1 - mean(last fifth) / mean(first fifth) of s in the window: the share it lost (unknown where the first
    fifth's mean is not positive)."""

    name, size_key, word = "drop", "gt", "falls by >"

    def measure(self, values: list[float], scale: Callable[[float], float]) -> float | None:
        a, b = _ends(values, 5)
        return None if a <= 0 else 1 - b / a


class Rising(TrendOp):
    """mean(last third) - mean(first third) of s in the window, over its scale, above r: the scale is the distance to
    score_target for `score` where the target is known (at least {trend.target_floor} x max(|score_target|, 1)),
    else |mean(first third)|."""

    name, word = "rising", "rises by >"
    parts: ClassVar[int] = 3  # it compares the first and last thirds (fifths: the whole run's start and end)

    def measure(self, values: list[float], scale: Callable[[float], float]) -> float | None:
        a, b = _ends(values, self.parts)
        return (b - a) / max(scale(a), 1e-12)


class NotRising(Rising):
    """rising's negation, but true where unknown ("not shown to rise")."""

    name, word, negated = "not_rising", "rises by <=", True


class Improving(Rising):
    """as rising, but mean(last fifth) - mean(first fifth) of the whole log, whatever the window: the run made
    progress (a run being watched: so far)."""

    name, word, span, parts = "improving", "has risen since the start by >", "log", 5


class NotImproving(Improving):
    """improving's negation, true where unknown."""

    name, word, negated = "not_improving", "has risen since the start by <=", True


class NotImprovingSince(Improving):
    """as not_improving, from the window's first step to the log's end: nothing that followed the window made up
    for it."""

    name, word, span, negated = "not_improving_since", "has risen since the window's start by <=", "since", True


class Swing(TrendOp):
    """the mean |step-to-step change| of s in the window."""

    name, size_key, word = "swing", "gt", "swings by >"

    def measure(self, values: list[float], scale: Callable[[float], float]) -> float | None:
        return sum(abs(y - x) for x, y in zip(values[:-1], values[1:], strict=True)) / (len(values) - 1)


class Spike(TrendOp):
    """the window's largest value of s over its median (a peak v times the window's usual level; unknown where the
    median is not positive: a window mostly without the quantity has no level to spike from)."""

    name, size_key, word = "spike", "gt", "peaks above its median by a factor >"

    def measure(self, values: list[float], scale: Callable[[float], float]) -> float | None:
        # the median, not the mean: the spike itself must not raise the level it is measured against
        middle = statistics.median(values)
        return max(values) / middle if middle > 0 else None


class FallsThenRises(TrendOp):
    """the window's minimum of s lies inside it (between its first and last fifths) and both fifths' means sit above
    it by more than r of it (0 where the minimum is at an end or not positive)."""

    name, word = "falls_then_rises", "falls, then rises by >"

    def measure(self, values: list[float], scale: Callable[[float], float]) -> float | None:
        n = len(values)
        k = max(1, n // 5)
        a, b = _ends(values, 5)
        low = min(values)
        inside = k <= values.index(low) < n - k
        return min(a, b) / low - 1 if inside and low > 0 else 0.0


class TrendUp(TrendOp):
    """a monotone rise of s in the window (Mann-Kendall, one-sided, z above {robust.z_significant}) whose robust line
    (Theil-Sen) rises by more than r of rising's scale (seen from its first third); 0 where the trend is not
    significant."""

    name, word = "trend_up", "rises steadily (Mann-Kendall, Theil-Sen) by >"
    sign: ClassVar[float] = 1.0  # the direction it measures: trend_down measures the fall

    def measure(self, values: list[float], scale: Callable[[float], float]) -> float | None:
        a, _ = _ends(values, 3)
        if self.sign * mann_kendall_z(values) <= TUNABLES.robust.z_significant:
            return 0.0
        return self.sign * theil_sen_change(values) / max(scale(a), 1e-12)


class TrendDown(TrendUp):
    """trend_up's mirror: a monotone fall of s in the window by more than r of its scale."""

    name, word, sign = "trend_down", "falls steadily (Mann-Kendall, Theil-Sen) by >", -1.0


TRENDS: dict[str, TrendOp] = {op.name: op() for op in (
    Drop, Rising, NotRising, Improving, NotImproving, NotImprovingSince, Swing, Spike, FallsThenRises, TrendUp,
    TrendDown)}


def check_min_values(min_values: Mapping[str, int]) -> None:
    """tunables.yaml's `trend.min_values` names each operator, and only them: a misspelt one is an error, no default."""
    if set(min_values) != set(TRENDS):
        raise ValueError(f"tunables.yaml: trend.min_values: no value for {sorted(set(TRENDS) - set(min_values))}, "
                         f"unknown operators {sorted(set(min_values) - set(TRENDS))}")


check_min_values(TUNABLES.trend.min_values)


class Trend(Node):
    """A trend operator (`TRENDS`) of a series, judged against a size: `{rising: s, by: r}`."""

    def __init__(self, op: TrendOp, series: Series, value: float, text: str):
        self.op, self.series, self.value, self.text = op, series, value, text

    def _values(self, log: Log, idx: Sequence[int]) -> list[float]:
        if self.op.span == "log":
            idx = range(log.n)
        elif self.op.span == "since":
            idx = range(idx[0], log.n) if len(idx) else idx
        log.reading_shape = True
        try:
            return [v for i in idx if (v := self.series.value(log, i)) is not None and math.isfinite(v)]
        finally:
            log.reading_shape = False

    def _scale(self, log: Log, a: float) -> float:
        target = log.facts.get("score_target") if self.series.label == "score" else None
        # the distance left to the target, at least a share of the target's size (a window that starts on the
        # target still has a scale)
        if target is not None:
            return max(abs(target - a), TUNABLES.trend.target_floor * max(abs(target), 1.0))
        return abs(a)

    def measure(self, log: Log, values: list[float]) -> float | None:
        if len(values) < TUNABLES.trend.min_values[self.op.name]:
            return None
        return self.op.measure(values, lambda a: self._scale(log, a))

    def over(self, log: Log, idx: Sequence[int]) -> bool | None:
        m = self.measure(log, self._values(log, idx))
        if m is None:
            return True if self.op.negated else None
        holds = m > self.value
        return not holds if self.op.negated else holds

    def evidence(self, log: Log, idx: Sequence[int]) -> list[dict]:
        values = self._values(log, idx)
        if not values:
            return []
        m = self.measure(log, values)
        step, metric = log.steps[idx[-1]], self.series.metric_name(log)
        if m is None:
            return [{"metric": metric, "step": step, "value": values[-1], "status": None,
                     "range": f"{self.series.label_for(log)} trend: too few values to tell ({len(values)})"}]
        holds = self.over(log, idx)
        raw = log.get(metric, idx[-1])
        return [{"metric": metric, "step": step, "value": values[-1] if raw is None else raw,
                 "range": f"{self.series.label_for(log)} {self.op.word} {self.text} over {len(values)} steps "
                          f"(here {fmt(m)})",
                 "status": None if holds is None else ("bad" if holds else "ok")}]
