"""A sweep's jobs aggregated for the stability map and parallel coordinates: each job's root cause and health, the
cells over two swept parameters (their seeds' mean score ± spread, healthy share, most common root), each seed
apart, and the parameters scaled to axes.

No Streamlit and no file access here: the rows come from the runs table (`data`), the root causes from
`playground.diagnose.root_causes`, the scores from `playground.rundir.score`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from playground.config.overrides import key_values
from playground.diagnose.causes import check_rank
from playground.diagnose.root_causes import HEALTHY, PENDING_ROOTS, job_verdict
from playground.sweep import swept_keys


def _as_number(value: str) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


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
                    **key_values(row.get("overrides") or ()), "score": row.get("score", math.nan),
                    "root": root, "healthy": healthy, "status": row.get("status", "")})
    table = pd.DataFrame(out)
    swept = [key for key in swept_keys(row.get("overrides") or () for row in rows) if key not in SWEEP_FIXED]
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
