"""Pure pandas shaping for the explorer: smoothing, wall time, downsampling, seed groups, sweeps, fix commands.

No Streamlit and no file access here, so every function is testable on a hand-made frame. The smoothing is
TensorBoard's (`tensorboard/webapp/.../data_transformer.ts`: EMA with zero-debias, non-finite points kept raw).
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from playground.diagnose.calibration import bands_entry
from playground.diagnose.causes import check_rank
from playground.metrics import STEP

TIMESTAMP_KEYS = ("timestamp", "_timestamp", "wall_time", "time/wall")
STEP_TIME_KEYS = ("perf/time_per_step", "timing_s/step")
SEVERITY_ORDER = {"info": 0, "warning": 1, "critical": 2}
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


def parse_overrides(overrides: Iterable[str]) -> dict[str, str]:
    """Hydra override strings -> {key: value}; `+key=v`, `++key=v` and `~key` keep their bare key."""
    out = {}
    for item in overrides or ():
        key, sep, value = str(item).partition("=")
        key = key.lstrip("+~")
        out[key] = value if sep else "(deleted)"
    return out


def is_seed(key: str) -> bool:
    """`seed`, `trainer.seed`, ...: an override that picks the random seed."""
    return key == "seed" or key.endswith(".seed")


def seed_group_key(overrides: Iterable[str], extra: Sequence[Any] = ()) -> str:
    """What a run is, seed aside: its overrides without the seed, sorted (runs with the same key differ by seed)."""
    params = {k: v for k, v in parse_overrides(overrides).items() if not is_seed(k)}
    return " ".join([*(str(e) for e in extra if e), *(f"{k}={v}" for k, v in sorted(params.items()))]) or "(defaults)"


def differing_params(overrides_by_run: Mapping[str, Iterable[str]]) -> pd.DataFrame:
    """The overrides that differ between runs (only those), one row per run; an absent key shows as "—"."""
    parsed = {run: parse_overrides(ov) for run, ov in overrides_by_run.items()}
    keys = sorted({k for p in parsed.values() for k in p})
    differ = [k for k in keys if len({p.get(k) for p in parsed.values()}) > 1]
    return pd.DataFrame([{k: p.get(k, "—") for k in differ} for p in parsed.values()], index=list(parsed),
                        columns=differ)


def chain(report: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """A report's findings in diagnosis order: each root cause followed by its consequences (`findings.json`'s
    `diagnoses`), then any finding no diagnosis holds. Each item: `finding`, `number` ("1", "1.1"), `role`
    ("root", "consequence" or "alone": a diagnosis without consequences, an info finding, an older report's finding)
    and `cause` (the root's id, for a consequence)."""
    if not report:
        return []
    findings = [f for f in report.get("findings", []) or [] if isinstance(f, dict)]
    out: list[dict[str, Any]] = []
    placed: set[tuple] = set()

    def key(f: Mapping[str, Any]) -> tuple:
        return f.get("id"), f.get("first_step"), f.get("rule")

    for d in report.get("diagnoses", []) or []:
        root = d.get("root") if isinstance(d, dict) else None
        if not isinstance(root, dict):
            continue
        consequences = [c for c in d.get("consequences", []) or [] if isinstance(c, dict)]
        number = str(len([x for x in out if x["role"] != "consequence"]) + 1)
        out.append({"finding": root, "number": number, "role": "root" if consequences else "alone", "cause": None})
        out += [{"finding": c, "number": f"{number}.{i + 1}", "role": "consequence", "cause": root.get("id")}
                for i, c in enumerate(consequences)]
        placed |= {key(root), *(key(c) for c in consequences)}
    for f in findings:
        if key(f) not in placed:
            out.append({"finding": f, "number": str(len([x for x in out if x["role"] != "consequence"]) + 1),
                        "role": "alone", "cause": None})
    return out


def worst_finding(findings: Sequence[Mapping[str, Any]] | None) -> str:
    """The id of the most severe finding (earliest first among equals); "" when there are none."""
    if not findings:
        return ""
    ranked = sorted(findings, key=lambda f: (-SEVERITY_ORDER.get(f.get("severity", "info"), 0),
                                             f.get("first_step") or 0))
    return str(ranked[0].get("id", ""))


def _as_number(value: str) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


HEALTHY = "healthy"  # a run's root when it has no warning or critical finding
PROBLEM_SEVERITIES = ("warning", "critical")
PENDING_ROOTS = ("running", "?")  # a job still training (no findings.json yet), a mystery run's hidden diagnosis


def run_root(items: Sequence[Mapping[str, Any]]) -> str:
    """A run's root cause from its findings in diagnosis order (`chain`): the root of its gravest diagnosis that holds
    a warning or critical finding (a diagnosis is as grave as its gravest member; the report lists the gravest
    first, so among equals the first); HEALTHY when no finding is a warning or worse."""
    best, best_rank = HEALTHY, 0
    current, rank = "", 0
    for item in [*items, {"role": "end", "finding": {}}]:
        finding = item.get("finding") or {}
        if item.get("role") != "consequence":  # a new diagnosis: close the one before
            if rank > best_rank:
                best, best_rank = current, rank
            current, rank = str(finding.get("id", "")), 0
        severity = finding.get("severity", "info")
        if severity in PROBLEM_SEVERITIES:
            rank = max(rank, SEVERITY_ORDER[severity])
    return best


def job_verdict(items: Sequence[Mapping[str, Any]], status: str, mystery: bool = False) -> tuple[str, bool | None]:
    """A sweep job's root cause (`run_root` of its `chain`) and whether it is healthy; None while it is not judged:
    still training ("running": findings.json is written when a run ends) or a mystery run ("?": kept hidden)."""
    if mystery:
        return "?", None
    if status == "running":
        return "running", None
    root = run_root(items)
    return root, root == HEALTHY


SWEEP_FIXED = ("run", "label", "job", "score", "root", "healthy", "status")


def sweep_jobs(rows: Sequence[Mapping[str, Any]]) -> tuple[pd.DataFrame, list[str]]:
    """A sweep's jobs as one table, and the parameters that vary in it (seed keys among them).

    Args:
        rows: one per job: run, label, job, overrides (Hydra override strings), score, chain (`chain`), status,
            mystery.

    Returns:
        (columns run, label, job, a column per override key as text ("—" where a job lacks it), score, root,
        healthy, status; the override keys whose value differs between jobs, in the first job's order).
    """
    out = []
    for row in rows:
        root, healthy = job_verdict(row.get("chain") or [], str(row.get("status", "")), bool(row.get("mystery")))
        out.append({"run": row["run"], "label": row.get("label", row["run"]), "job": row.get("job", ""),
                    **parse_overrides(row.get("overrides") or ()), "score": row.get("score", math.nan), "root": root,
                    "healthy": healthy, "status": row.get("status", "")})
    table = pd.DataFrame(out)
    swept = [c for c in table.columns if c not in SWEEP_FIXED and table[c].astype(str).nunique() > 1]
    for column in swept:
        table[column] = table[column].fillna("—").astype(str)
    return table, swept


def _root_order(root: str) -> tuple:
    """Ties between a cell's roots: the guide's §11.2 order (ids no check names after), then alphabetically, and
    HEALTHY after every problem (a tie between healthy seeds and broken ones names the problem)."""
    return root == HEALTHY, check_rank(root), root


def most_common_root(roots: Iterable[str]) -> str:
    """The root most of a cell's seeds share (ties: `_root_order`); jobs still pending count only when all are."""
    roots = [str(r) for r in roots if r]
    judged = [r for r in roots if r not in PENDING_ROOTS] or roots
    if not judged:
        return ""
    counts = pd.Series(judged).value_counts()
    return min(counts.index, key=lambda r: (-int(counts[r]), *_root_order(r)))


def root_counts(roots: Iterable[str]) -> str:
    """`healthy ×2, lr_too_high ×1`: each root of a cell with its number of seeds, the most common first."""
    roots = [str(r) for r in roots if r]
    if not roots:
        return ""
    counts = pd.Series(roots).value_counts()
    ordered = sorted(counts.index, key=lambda r: (-int(counts[r]), *_root_order(r)))
    return ", ".join(f"{r} ×{int(counts[r])}" for r in ordered)


def _decimals(value: float) -> int:
    """Decimals that give a value about three significant digits (412, 41.2, 4.12, 0.412)."""
    if not math.isfinite(value) or value == 0:
        return 2
    return max(0, 2 - math.floor(math.log10(abs(value))))


def mean_spread(mean: float, spread: float) -> str:
    """`412 ± 60` (spread to the mean's decimals); the spread is "—" when unknown (one seed), the mean too."""
    if not math.isfinite(mean):
        return "—"
    places = _decimals(mean)
    return f"{mean:.{places}f} ± " + (f"{spread:.{places}f}" if math.isfinite(spread) else "—")


def _axis(sweep: pd.DataFrame, key: str | None) -> pd.Series:
    """A swept parameter's values as text; "—" for every job when there is none (a one-knob sweep's one row)."""
    return pd.Series("—", index=sweep.index) if key is None else sweep[key].astype(str)


def sweep_cells(sweep: pd.DataFrame, x: str | None, y: str | None, healthy_text: str = "{k}/{n} healthy"
                ) -> pd.DataFrame:
    """Stability map cells over two swept parameters, the seeds of each cell aggregated.

    Args:
        sweep: one row per job, a column per swept parameter plus `score` (final score, NaN while unknown), `root`
            (`run_root`, or one of PENDING_ROOTS) and `healthy` (True, False, or None while not judged).
        x, y: the two parameters (a seed key is never one: its values are what a cell aggregates); None for a
            sweep of fewer knobs (every job's value "—": one row, or one cell).
        healthy_text: the healthy share's words, with `{k}` healthy of `{n}` judged seeds.

    Returns:
        One row per (x, y): x, y, score (mean over seeds), spread (sample standard deviation, n - 1; NaN with one
        score), lo, hi (min, max), runs (jobs), judged (jobs with a diagnosis), healthy (how many healthy), share
        (healthy / judged, NaN when none is judged), root (`most_common_root`), roots (`root_counts`), label (one
        line: `412 ± 60 · 2/3 healthy · lr_too_high`) and text (the same on three lines, for the cell).
    """
    rows = []
    for (xv, yv), group in sweep.groupby([_axis(sweep, x).rename("x"), _axis(sweep, y).rename("y")], sort=False):
        scores = pd.to_numeric(group["score"], errors="coerce").astype(float)
        scores = scores[np.isfinite(scores)]
        judged = group["healthy"].dropna().astype(bool)
        mean = float(scores.mean()) if len(scores) else math.nan
        spread = float(scores.std(ddof=1)) if len(scores) > 1 else math.nan
        share = healthy_text.format(k=int(judged.sum()), n=len(judged)) if len(judged) else "—"
        root = most_common_root(group["root"])
        score_text = mean_spread(mean, spread)
        rows.append({"x": xv, "y": yv, "score": mean, "spread": spread,
                     "lo": float(scores.min()) if len(scores) else math.nan,
                     "hi": float(scores.max()) if len(scores) else math.nan,
                     "runs": len(group), "judged": len(judged), "healthy": int(judged.sum()),
                     "share": float(judged.mean()) if len(judged) else math.nan, "root": root,
                     "roots": root_counts(group["root"]), "label": " · ".join([score_text, share, root]),
                     "text": "\n".join([score_text, share, root])})
    columns = ["x", "y", "score", "spread", "lo", "hi", "runs", "judged", "healthy", "share", "root", "roots",
               "label", "text"]
    return pd.DataFrame(rows, columns=columns)


def seed_cells(sweep: pd.DataFrame, x: str | None, y: str | None, seed: str | None) -> pd.DataFrame:
    """The stability map seed by seed: one row per job with x, y, seed (its value, "—" without a seed key), run,
    score, root and text (`2: 412 · lr_too_high`: seed, score to about three digits, root)."""
    scores = pd.to_numeric(sweep["score"], errors="coerce").astype(float)
    seeds = _axis(sweep, seed)
    texts = [("" if seed is None else f"{v}: ") + ("—" if not math.isfinite(s) else f"{s:.{_decimals(s)}f}") + f" · {r}"
             for v, s, r in zip(seeds, scores, sweep["root"], strict=True)]
    return pd.DataFrame({"x": _axis(sweep, x), "y": _axis(sweep, y), "seed": seeds, "run": sweep["run"],
                         "score": scores, "root": sweep["root"], "text": texts}).reset_index(drop=True)


def sort_values(values: Iterable[str]) -> list[str]:
    """Parameter values in numeric order when they are all numbers, else as text."""
    values = list(dict.fromkeys(values))
    numbers = [_as_number(v) for v in values]
    if all(n is not None for n in numbers):
        return [v for _, v in sorted(zip(numbers, values, strict=True))]
    return sorted(values)


def parallel_long(sweep: pd.DataFrame, dims: Sequence[str]) -> pd.DataFrame:
    """Parallel coordinates: each job's parameters (and score) scaled to [0, 1] per axis.

    Numeric parameters spanning more than two decades are placed on a log scale; text values by rank.

    Returns:
        Columns run, dim, pos (scaled), value (as text), score, root.
    """
    rows = []
    for dim in dims:
        values = sweep[dim].astype(str)
        order = sort_values(values)
        numbers = [_as_number(v) for v in order]
        if all(n is not None for n in numbers) and len(order) > 1:
            nums = np.asarray(numbers)
            if nums.min() > 0 and nums.max() / nums.min() > 100:
                nums = np.log10(nums)
            span = (nums.max() - nums.min()) or 1.0
            scale = {v: float((n - nums.min()) / span) for v, n in zip(order, nums, strict=True)}
        else:
            scale = {v: i / max(1, len(order) - 1) for i, v in enumerate(order)}
        for run, value, score, root in zip(sweep["run"], values, sweep["score"], sweep["root"], strict=True):
            rows.append({"run": run, "dim": dim, "pos": scale[value], "value": value, "score": score,
                         "root": root or HEALTHY})
    return pd.DataFrame(rows, columns=["run", "dim", "pos", "value", "score", "root"])


def fix_command(overrides: Iterable[str], fix: str, module: str = "playground.train") -> str:
    """The command line that reruns a run's config with a finding's fix applied.

    The fix's overrides come last and replace any run override of the same key, so the result is valid
    for Hydra whether or not it lets a later override win.

    Args:
        overrides: the run's Hydra overrides (`run.json` "overrides").
        fix: the finding's fix, Hydra overrides separated by spaces.

    Returns:
        `python -m playground.train <run overrides> <fix overrides>`, each argument shell-quoted.
    """
    fixes = shlex.split(fix or "")
    fixed_keys = set(parse_overrides(fixes))
    kept = [o for o in overrides or () if str(o).partition("=")[0].lstrip("+~") not in fixed_keys]
    return " ".join(["python", "-m", module, *(shlex.quote(str(o)) for o in [*kept, *fixes])])
