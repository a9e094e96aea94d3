"""Pure pandas shaping of metric series for the charts: smoothing, wall time, downsampling, seed groups, the guide's
normal bands and the engine's marks.

No Streamlit and no file access here, so every function is testable on a hand-made frame. The smoothing is
TensorBoard's (`tensorboard/webapp/.../data_transformer.ts`: EMA with zero-debias, non-finite points kept raw).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from playground.diagnose.calibration import bands_entry
from playground.metric_names import STEP_TIME, TIME_PER_STEP
from playground.metrics import STEP

TIMESTAMP_KEYS = ("timestamp", "_timestamp", "wall_time", "time/wall")
STEP_TIME_KEYS = (TIME_PER_STEP, STEP_TIME)
LONG_COLUMNS = ["run", "step", "x", "value", "smoothed"]


def records_frame(records: Sequence[Mapping[str, float]]) -> pd.DataFrame:
    """One row per record (already sorted by step), one float column per metric; a missing value is NaN."""
    if not records:
        return pd.DataFrame({STEP: pd.Series(dtype="float64")})
    return pd.DataFrame.from_records(records).astype("float64")


def smooth_ema(values: np.ndarray | Sequence[float], weight: float) -> np.ndarray:
    """TensorBoard's debiased EMA: `last = w*last + (1-w)*v`, divided by `1 - w**n` after n finite points.

    That is the weighted mean `sum(w**i * v[t-i]) / sum(w**i)` over finite points, which pandas'
    `ewm(adjust=True)` computes. Non-finite points are shown raw and do not advance the average.

    Args:
        values: `(n,)` the raw series.
        weight: smoothing weight in [0, 1); 0 returns the values unchanged.

    Returns:
        `(n,)` float array.
    """
    values = np.asarray(values, dtype=np.float64)
    if weight <= 0 or values.size == 0:
        return values.copy()
    out = values.copy()
    finite = np.isfinite(values)
    if finite.any():
        out[finite] = pd.Series(values[finite]).ewm(alpha=1.0 - weight, adjust=True).mean().to_numpy()
    return out


def ema_window(weight: float, tol: float = 1e-3) -> int:
    """How many trailing points decide the last smoothed value up to a weight of `tol` (at least 20)."""
    if weight <= 0:
        return 20
    return max(20, math.ceil(math.log(tol) / math.log(weight)))


def wall_time(df: pd.DataFrame) -> pd.Series | None:
    """Seconds since the first record: a timestamp column if logged, else the cumsum of per-step time.

    Returns None when the frame has neither (the caller falls back to steps).
    """
    for key in TIMESTAMP_KEYS:
        if key in df and df[key].notna().any():
            return df[key] - df[key].dropna().iloc[0]
    for key in STEP_TIME_KEYS:
        if key in df and df[key].notna().any():
            per_step = df[key].where(np.isfinite(df[key])).fillna(df[key].median())
            return per_step.cumsum()
    return None


def downsample_index(values: np.ndarray, max_points: int) -> np.ndarray:
    """Indices that keep the shape of a long series: first, last, and the min and max of each bucket.

    Args:
        values: `(n,)` series (non-finite points are always kept, so a NaN step is never hidden).
        max_points: about how many indices to return.

    Returns:
        Sorted unique indices, at most about `max_points` (+ the non-finite ones).
    """
    n = len(values)
    if n <= max_points:
        return np.arange(n)
    buckets = max(1, max_points // 2)
    edges = np.linspace(0, n, buckets + 1).astype(int)
    keep = [0, n - 1]
    filled = np.where(np.isfinite(values), values, np.nan)
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        chunk = filled[lo:hi]
        if hi > lo and not np.all(np.isnan(chunk)):
            keep += [lo + int(np.nanargmin(chunk)), lo + int(np.nanargmax(chunk))]
    keep += list(np.flatnonzero(~np.isfinite(values)))
    return np.unique(np.asarray(keep, dtype=int))


def metric_long(frames: Mapping[str, pd.DataFrame], metric: str, *, x_mode: str = "step", weight: float = 0.0,
                max_points: int = 1000) -> pd.DataFrame:
    """The long frame one chart draws: a row per (run, kept step) with raw and smoothed values.

    Args:
        frames: run label -> that run's records frame.
        metric: the column to draw.
        x_mode: "step" or "wall" (seconds; a run without per-step times falls back to its steps).
        weight: EMA smoothing weight (smoothing runs on the full series, before downsampling).
        max_points: per-run point budget for drawing.

    Returns:
        Columns run, step, x, value, smoothed, and index (the record's position, to match step_status).
    """
    parts = []
    for run, df in frames.items():
        if metric not in df or df[metric].isna().all():
            continue
        x = wall_time(df) if x_mode == "wall" else None
        sub = pd.DataFrame({"step": df[STEP], "x": df[STEP] if x is None else x, "value": df[metric],
                            "index": np.arange(len(df))})
        sub = sub[sub["value"].notna()]
        sub["smoothed"] = smooth_ema(sub["value"].to_numpy(), weight)
        sub = sub.iloc[downsample_index(sub["value"].to_numpy(), max_points)]
        sub.insert(0, "run", run)
        parts.append(sub)
    if not parts:
        return pd.DataFrame(columns=[*LONG_COLUMNS, "index"])
    return pd.concat(parts, ignore_index=True)


def group_stats(long: pd.DataFrame, groups: Mapping[str, str]) -> pd.DataFrame:
    """Mean and min-max of the smoothed values over the runs of each seed group (groups of 2+ runs only).

    Args:
        long: from `metric_long`.
        groups: run label -> group label.

    Returns:
        Columns group, step, x (mean over runs), mean, lo, hi, n.
    """
    sizes = pd.Series(groups).value_counts()
    multi = {run: g for run, g in groups.items() if sizes[g] > 1}
    sub = long[long["run"].isin(multi) & np.isfinite(long["smoothed"].astype(float))].copy()
    if sub.empty:
        return pd.DataFrame(columns=["group", "step", "x", "mean", "lo", "hi", "n"])
    sub["group"] = sub["run"].map(multi)
    out = sub.groupby(["group", "step"], as_index=False).agg(
        x=("x", "mean"), mean=("smoothed", "mean"), lo=("smoothed", "min"), hi=("smoothed", "max"),
        n=("run", "nunique"))
    return out


def ok_bands(metric: str, lo: float, hi: float, family: str | None = None) -> pd.DataFrame:
    """The guide's normal range of a metric (its glossary bands with status ok, merged) clipped for drawing.

    Where the diagnosis engine calibrated a task family's bands (`calibration.FAMILY_BANDS`), those are drawn
    instead, so the band agrees with the warn/bad marks. An unbounded side is drawn to the data's extreme, and
    at least 10% of the data's span past the finite edge so the band stays visible; a band judged on |value|
    is mirrored when the data go negative. A band more than the data's span away from the data is not drawn
    (it would squeeze the lines into a sliver): it becomes a note at the chart's top or bottom edge.

    Args:
        metric: a metric name (aliases and per-task suffixes allowed).
        lo, hi: the drawn data's finite min and max.
        family: the runs' task family (gym | token), or None for the guide's bands.

    Returns:
        Columns lo, hi, where ("in" | "above" | "below" the data), text (e.g. "ok ≥ 0.3 ↑"), one row per
        contiguous ok range; empty when the guide gives none.
    """
    entry = bands_entry(metric, family or "")  # the bands the engine's warn/bad marks come from
    rows: list[list[Any]] = []
    for band in (entry or {}).get("bands", []):
        if band.get("status") != "ok":
            continue
        b_lo = -math.inf if band.get("lo") is None else float(band["lo"])
        b_hi = math.inf if band.get("hi") is None else float(band["hi"])
        if rows and rows[-1][1] == b_lo:
            rows[-1][1] = b_hi
        else:
            rows.append([b_lo, b_hi])
    if entry and entry.get("band_on_abs") and lo < 0:
        rows += [[-b, -a] for a, b in rows]
    span = (hi - lo) or abs(hi) or 1.0
    out = []
    for b_lo, b_hi in rows:
        text = f"ok {b_lo:g}–{b_hi:g}" if math.isfinite(b_lo) and math.isfinite(b_hi) else (
            f"ok ≥ {b_lo:g}" if math.isfinite(b_lo) else f"ok ≤ {b_hi:g}")
        if b_lo > hi + span:  # far above the data: drawing it would flatten the lines, so point to it
            out.append({"lo": math.nan, "hi": math.nan, "where": "above", "text": f"{text} ↑"})
            continue
        if b_hi < lo - span:
            out.append({"lo": math.nan, "hi": math.nan, "where": "below", "text": f"{text} ↓"})
            continue
        if math.isinf(b_lo):
            b_lo = min(lo, b_hi - 0.1 * span)
        if math.isinf(b_hi):
            b_hi = max(hi, b_lo + 0.1 * span)
        out.append({"lo": b_lo, "hi": b_hi, "where": "in", "text": text})
    return pd.DataFrame(out, columns=["lo", "hi", "where", "text"])


def attach_status(long: pd.DataFrame, statuses: Mapping[str, Sequence[str | None] | None]) -> pd.DataFrame:
    """`long` with a `status` column: the engine's verdict at each drawn step ("ok" | "warn" | "bad" | None).

    Args:
        long: from `metric_long` (its `index` column is the record position).
        statuses: run label -> the engine's per-record statuses for this metric (None: not judged).
    """
    out = long.copy()
    column: list[str | None] = []
    for run, index in zip(long["run"], long["index"], strict=True):
        status = statuses.get(run)
        column.append(status[index] if status and 0 <= index < len(status) else None)
    out["status"] = column
    return out


def largest_jumps(long: pd.DataFrame, n: int = 3) -> pd.DataFrame:
    """The `n` largest changes between neighbouring points of a drawn line (`metric_long`'s raw values), in step order:
    what the eye sees as a jump on the chart, which draws the same points.

    Returns:
        Columns step (where the line arrives after the jump), x, value, change (signed).
    """
    line = long[np.isfinite(pd.to_numeric(long["value"], errors="coerce").astype(float))].sort_values("step")
    change = line["value"].astype(float).diff()
    top = line.assign(change=change).dropna(subset=["change"])
    top = top[top["change"] != 0]  # a flat line has no jump (sorted after filtering: no row of a flat step comes back)
    top = top.iloc[np.argsort(-top["change"].abs().to_numpy(), kind="stable")]
    return top.head(n).sort_values("step")[["step", "x", "value", "change"]].reset_index(drop=True)
