"""Window conditions on the shape of a whole series, beyond the window statistics of `conditions.Trend`: isolated
spikes against the running level, a plateau that holds most of a run, a held-out score that falls from its peak
while the training reward goes on rising, and one data source's held-out score that falls while another's rises.
`conditions.compile_condition` builds them from `rules.yaml` (`{spikes: ...}`, `{plateau: ...}`,
`{falls_from_peak: ...}`, `{source_falls: ...}`, `{logged: ...}`; each class's doc is what rules.yaml's
header says of it, its sizes are tunables.yaml's); they are judged on a window (usually the whole run so
far: a rule of kind `whole`), never at a single step.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Sequence

from playground.diagnose.log import Log
from playground.diagnose.node import Node
from playground.diagnose.robust import mann_kendall_z, running_level, spread, theil_sen_change
from playground.diagnose.series import Series, compile_series
from playground.diagnose.tunables import TUNABLES
from playground.metrics import PER_SOURCE_SCORE, fmt


def _points(series: Series, log: Log, idx: Sequence[int]) -> list[tuple[int, float]]:
    """(record index, value) of the window's finite values, read as shapes (a sparkline's too)."""
    log.reading_shape = True
    try:
        return [(i, v) for i in idx if (v := series.value(log, i)) is not None and math.isfinite(v)]
    finally:
        log.reading_shape = False


def _evaluations(points: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """The points where the value changed (the first included): a validation logged every few steps and carried
    between its evaluations counts once per evaluation."""
    return [(i, v) for k, (i, v) in enumerate(points) if k == 0 or v != points[k - 1][1]]


class _Shape(Node):
    """A window condition: `over` judges it, `evidence` says what it measured."""

    series: Series  # the series it judges (each shape's constructor sets it)

    def measure(self, log: Log, idx: Sequence[int]) -> tuple[bool | None, str, int | None]:
        """Whether it holds (None: too little data), what it measured, and the record index to show it at."""
        raise NotImplementedError

    missing: bool | None = None  # what too little data counts as (None: unknown)

    def over(self, log: Log, idx: Sequence[int]) -> bool | None:
        holds = self.measure(log, idx)[0]
        return self.missing if holds is None else holds

    def evidence(self, log: Log, idx: Sequence[int]) -> list[dict]:
        holds, text, at = self.measure(log, idx)
        if at is None:
            return []
        metric = self.series.metric_name(log)
        raw = log.get(metric, at)
        return [{"metric": metric, "step": log.steps[at], "value": raw if raw is not None else
                 self.series.value(log, at), "range": text,
                 "status": None if holds is None else ("bad" if holds else "ok")}]


class Spikes(_Shape):
    """at least n values of s above `ratio` x their running level (the median of the {robust.level_lookback} values
    before each): isolated spikes, not a level that rose; unknown with fewer than {spikes.min_values} values."""

    def __init__(self, series: Series, ratio: float, text: str, count: int):
        self.series, self.ratio, self.text, self.count = series, ratio, text, count

    def measure(self, log: Log, idx: Sequence[int]) -> tuple[bool | None, str, int | None]:
        points = _points(self.series, log, idx)
        values = [v for _, v in points]
        found = []  # (ratio, record index)
        for k, (i, v) in enumerate(points):
            level = running_level(values, k)
            if level and level > 0 and v > self.ratio * level:
                found.append((v / level, i))
        if len(values) < TUNABLES.spikes.min_values:
            return None, "", None
        worst = max(found) if found else None
        text = (f"{self.series.label_for(log)} above {self.text} x its running level (the median of the 10 steps "
                f"before) at {len(found)} steps (needs {self.count})"
                + (f"; the largest {fmt(worst[0])} x" if worst else ""))
        return len(found) >= self.count, text, worst[1] if worst else points[-1][0]


class Plateau(_Shape):
    """s reached its final level (the median of its last tenth, within its noise) early and held it, without a trend
    both significant and larger than {plateau.trend_over_noise} x its noise, for at least a share f of the window's
    steps; and h (a held-out score, where logged) did not rise over that span by more than {plateau.heldout_rise} of
    its start (its last third of evaluations against its first): a noisy training reward beside a climbing
    validation is a run that learns. Unknown with fewer than {plateau.min_values} values."""

    def __init__(self, series: Series, share: float, text: str, heldout: Series | None = None):
        self.series, self.share, self.text, self.heldout = series, share, text, heldout

    def _heldout_rose(self, log: Log, idx: Sequence[int]) -> float | None:
        """How far the held-out score rose over the span (its last evaluation over its first), None unlogged."""
        if self.heldout is None:
            return None
        points = _points(self.heldout, log, idx)
        evaluations = [v for _, v in _evaluations(points)]
        if len(evaluations) < 3:
            return None
        k = max(1, len(evaluations) // 3)  # thirds, not single evaluations: each is as noisy as its small set
        first, last = statistics.mean(evaluations[:k]), statistics.mean(evaluations[-k:])
        return (last - first) / max(abs(first), TUNABLES.plateau.heldout_floor)

    def measure(self, log: Log, idx: Sequence[int]) -> tuple[bool | None, str, int | None]:
        points = _points(self.series, log, idx)
        if len(points) < TUNABLES.plateau.min_values:
            return None, "", None
        values = [v for _, v in points]
        tail = values[-max(5, len(values) // 10):]
        final = statistics.median(tail)
        noise = max(spread(values[-len(values) // 3:]), TUNABLES.plateau.noise_floor * abs(final), 1e-9)
        rolling = [statistics.median(values[max(0, k - 4):k + 1]) for k in range(len(values))]
        # the first step whose running median is within the noise of the final level (the last one at the latest: a
        # median of the last tenth need not match the last five's)
        reached = next((k for k, v in enumerate(rolling) if abs(v - final) <= noise), len(values) - 1)
        flat = values[reached:]
        first_step, reach_step, last_step = (log.steps[points[k][0]] for k in (0, reached, -1))
        share = (last_step - reach_step) / max(last_step - first_step, 1)
        z = mann_kendall_z(flat) if len(flat) >= 3 else 0.0
        # a trend is a plateau's end only where it is both significant and larger than the noise band
        # (tunables.yaml's plateau.trend_over_noise says why)
        moving = (abs(z) > TUNABLES.robust.z_significant
                  and abs(theil_sen_change(flat)) > TUNABLES.plateau.trend_over_noise * noise)
        rose = self._heldout_rose(log, [i for i in idx if log.steps[i] >= reach_step])
        holds = share >= self.share and not moving and (rose is None or rose <= TUNABLES.plateau.heldout_rise)
        text = (f"{self.series.label_for(log)} flat at {fmt(final)} (within {fmt(noise)}) from step {reach_step} to "
                f"{last_step}: {share:.0%} of the run (needs {self.text}), Mann-Kendall z {z:+.2f}"
                + ("" if rose is None else f"; the held-out score rose by {rose:.0%} of its start there"))
        return holds, text, points[-1][0]


class FallsFromPeak(_Shape):
    """s (a held-out score, logged every few steps and carried between) ended more than r x |its peak| (at least
    {falls_from_peak.peak_floor}; of: range, r x its range over the window: for scores of any sign) below its peak,
    its last two evaluations both below that line, while t (the training reward, where given) ended above where it
    stood when s peaked; with fewer than {falls_from_peak.min_evaluations} distinct values, m (default: unknown)."""

    def __init__(self, series: Series, by: float, text: str, rising: Series | None, of: str = "peak",
                 missing: bool | None = None):
        if of not in ("peak", "range"):
            raise ValueError(f"rules.yaml: falls_from_peak's `of` is peak or range, not {of!r}")
        self.series, self.by, self.text, self.rising, self.of = series, by, text, rising, of
        self.missing = missing

    def measure(self, log: Log, idx: Sequence[int]) -> tuple[bool | None, str, int | None]:
        points = _points(self.series, log, idx)
        evaluations = _evaluations(points)
        if len(evaluations) < TUNABLES.falls_from_peak.min_evaluations:
            return None, "", None
        values = [v for _, v in evaluations]
        top = max(range(len(values)), key=values.__getitem__)
        floor = TUNABLES.falls_from_peak.peak_floor
        size = values[top] - min(values) if self.of == "range" else max(abs(values[top]), floor)
        line = values[top] - self.by * size
        after = values[top + 1:]
        fell = len(after) >= 2 and all(v < line for v in after[-2:])
        peak_index, last_index = evaluations[top][0], evaluations[-1][0]
        text = (f"{self.series.label_for(log)} peaked at {fmt(values[top])} (step {log.steps[peak_index]}) and ended "
                f"at {fmt(values[-1])}: below its peak by > {self.text} of its {self.of} at its last two evaluations")
        holds = fell
        if self.rising is not None:
            train = _points(self.rising, log, idx)
            at_peak = [v for i, v in train if abs(i - peak_index) <= 2]
            tail = [v for _, v in train[-max(3, len(train) // 5):]]
            if not at_peak or not tail:
                return None, text, last_index
            gained = statistics.mean(tail) - statistics.mean(at_peak)
            holds = fell and gained > 0
            text += (f", while {self.rising.label_for(log)} went from {fmt(statistics.mean(at_peak))} there to "
                     f"{fmt(statistics.mean(tail))}")
        return holds, text, last_index


class Logged(_Shape):
    """the window holds at least n distinct values of s (a validation logged every few steps and carried between
    counts once per evaluation)."""

    def __init__(self, series: Series, count: float, text: str):
        self.series, self.count, self.text = series, count, text

    def measure(self, log: Log, idx: Sequence[int]) -> tuple[bool | None, str, int | None]:
        points = _points(self.series, log, idx)
        evaluations = len(_evaluations(points))
        text = f"{self.series.label_for(log)} evaluated {evaluations} times (needs {self.text})"
        return evaluations >= self.count, text, points[-1][0] if points else None


class SourceFalls(Node):
    """with two data sources or more (verl's val-core/<source>/<var>/mean@N), one source's score ended more than r x
    |its peak| (at least {falls_from_peak.peak_floor}) below its peak, its last two evaluations both below that line,
    while another source's score ended above where it stood when the first peaked (falls_from_peak, each source
    against each other); unknown with fewer than two sources."""

    def __init__(self, by: float, text: str):
        self.by, self.text = by, text

    @staticmethod
    def sources(log: Log) -> dict[str, Series]:
        """Each data source's score series, by source (the first score key a source logs)."""
        out: dict[str, Series] = {}
        for key in log.cols:
            if (match := PER_SOURCE_SCORE.match(key)) and match["source"] not in out:
                out[match["source"]] = compile_series(key, {})  # a metric by its name
        return out

    def fallen(self, log: Log, idx: Sequence[int]) -> list[tuple[FallsFromPeak, Series]] | None:
        """Each source that fell while another rose, with the rising one that gained most over the window (None:
        fewer than two sources, or none with enough evaluations)."""
        sources = self.sources(log)
        if len(sources) < 2:
            return None
        logged = {name: _logged_in(log, series.metric_name(log), idx) for name, series in sources.items()}
        out, judged = [], False
        for name, series in sources.items():
            fell = FallsFromPeak(series, self.by, self.text, None).measure(log, sorted(logged[name]))[0]
            judged |= fell is not None
            if not fell:  # a source that did not fall is no pair's fallen one: its pairs need no measuring
                continue
            rises = []
            for other, rival in sources.items():
                if other == name:
                    continue
                shape, pair = FallsFromPeak(series, self.by, self.text, rival), sorted(logged[name] | logged[other])
                if shape.measure(log, pair)[0]:
                    rises.append((_gain(rival, log, pair), shape, rival))
            if rises:
                _, shape, rival = max(rises, key=lambda r: r[0])
                out.append((shape, rival))
        return out if out or judged else None

    def over(self, log: Log, idx: Sequence[int]) -> bool | None:
        fallen = self.fallen(log, idx)
        return None if fallen is None else bool(fallen)

    def evidence(self, log: Log, idx: Sequence[int]) -> list[dict]:
        rows = []
        for shape, rival in self.fallen(log, idx) or []:
            for row in shape.evidence(log, idx):
                values = [fmt(v) for _, v in _evaluations(_points(shape.series, log, idx))]
                rows.append({**row, "range": f"{row['range']}; its evaluations: {', '.join(values)}"})
            points = _points(rival, log, idx)
            rival_values = [fmt(v) for _, v in _evaluations(points)]
            rows.append({"metric": rival.label, "step": log.steps[points[-1][0]], "value": points[-1][1],
                         "range": f"its evaluations: {', '.join(rival_values)}", "status": "ok"})
        return rows


def _logged_in(log: Log, key: str, idx: Sequence[int]) -> set[int]:
    """The records of the window `idx` where `key` has a value. A pair of sources is measured on theirs alone: the
    same points, but a whole-run rule is judged again on each start of the log (engine._whole), and a validation
    logged every 10th step would otherwise cost a pass over every step, per pair, each time."""
    memo = (("logged", key), -1)
    if memo not in log.memo:
        log.memo[memo] = [i for i, v in enumerate(log.cols.get(key, [])) if v is not None]
    every: list[int] = log.memo[memo]
    if not idx:
        return set()
    if idx[-1] - idx[0] + 1 == len(idx):  # a run of records (a whole-run rule's start of the log)
        return set(every[bisect.bisect_left(every, idx[0]):bisect.bisect_right(every, idx[-1])])
    return set(every) & set(idx)


def _gain(series: Series, log: Log, idx: Sequence[int]) -> float:
    """How far a series' last evaluation stands above its first."""
    values = [v for _, v in _evaluations(_points(series, log, idx))]
    return values[-1] - values[0] if values else 0.0
