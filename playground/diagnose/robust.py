"""Robust trend statistics for the rules' windows: Mann–Kendall's test for a monotone trend and Theil–Sen's slope.

Both rank pairs of points instead of averaging values, so one outlier (a spike, a noisy validation) neither makes a
trend nor hides one: what `rules.yaml` means by "rising" where a trend is meant (`trend_up`, `trend_down`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from playground.diagnose.tunables import TUNABLES


def thinned(values: Sequence[float]) -> tuple[list[float], int]:
    """Every k-th value, k chosen so that at most `robust.max_points` remain (tunables.yaml: both statistics compare
    every pair of points), the last one kept, and k."""
    stride = max(1, math.ceil(len(values) / TUNABLES.robust.max_points))
    picked = list(values[::-1][::stride])[::-1]
    return picked, stride


def mann_kendall_z(values: Sequence[float]) -> float:
    """Mann–Kendall's z: positive for a rising series, negative for a falling one; |z| above `robust.z_significant`
    (tunables.yaml) is significant at 5 % one-sided. Ties (equal values, e.g. a validation score carried between its
    evaluations) count as no change and shrink the variance as Kendall's correction does."""
    values, _ = thinned(values)
    n = len(values)
    if n < 3:
        return 0.0
    s = sum((values[j] > values[i]) - (values[j] < values[i]) for i in range(n - 1) for j in range(i + 1, n))
    ties = [c for c in _counts(values) if c > 1]
    var = (n * (n - 1) * (2 * n + 5) - sum(t * (t - 1) * (2 * t + 5) for t in ties)) / 18
    if var <= 0 or s == 0:
        return 0.0
    return (s - math.copysign(1, s)) / math.sqrt(var)


def _counts(values: Sequence[float]) -> list[int]:
    out: dict[float, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return list(out.values())


def theil_sen_change(values: Sequence[float]) -> float:
    """Theil–Sen's slope (the median of every pair's slope, per record) times the span: the change a robust line
    through the window makes from its first record to its last."""
    span = len(values) - 1
    values, stride = thinned(values)
    n = len(values)
    if n < 2:
        return 0.0
    slopes = [(values[j] - values[i]) / ((j - i) * stride) for i in range(n - 1) for j in range(i + 1, n)]
    return statistics.median(slopes) * span


def running_level(values: Sequence[float], i: int) -> float | None:
    """The median of the `robust.level_lookback` values before index i (tunables.yaml): the level a value at i is
    measured against (the value itself and what follows cannot raise it); None with fewer than
    `robust.level_min_values` before it."""
    before = values[max(0, i - TUNABLES.robust.level_lookback):i]
    return statistics.median(before) if len(before) >= TUNABLES.robust.level_min_values else None


def spread(values: Sequence[float]) -> float:
    """1.4826 x the median absolute deviation: a standard deviation that a few outliers do not inflate."""
    if not values:
        return 0.0
    middle = statistics.median(values)
    return 1.4826 * statistics.median(abs(v - middle) for v in values)


def change_point(values: Sequence[float | None], toward: float) -> int | None:
    """The index where the series' level changed most towards `toward` (the level of what went wrong): the split
    that maximises the standardised difference of the means before and after it (the CUSUM statistic of a single mean
    shift, |m_before - m_after| * sqrt(n_before * n_after / n)) among the splits whose after-mean is nearer `toward`
    than their before-mean; the earliest on a tie. None values are skipped; None where no split moves towards it."""
    # running sums of the finite values before each split: one pass, not a mean of each side at every split
    kept = [v if v is not None and math.isfinite(v) else None for v in values]
    present = [v for v in kept if v is not None]
    total_n, total = len(present), math.fsum(present)
    n_b, sum_b = 0, 0.0
    best, best_at = -1.0, None
    for at in range(1, len(values)):
        previous = kept[at - 1]
        if previous is not None:
            n_b, sum_b = n_b + 1, sum_b + previous
        n_a = total_n - n_b
        if not n_b or not n_a:
            continue
        m_b, m_a = sum_b / n_b, (total - sum_b) / n_a
        if abs(m_a - toward) >= abs(m_b - toward):
            continue
        stat = abs(m_b - m_a) * math.sqrt(n_b * n_a / (n_b + n_a))
        if stat > best:
            best, best_at = stat, at
    return best_at
