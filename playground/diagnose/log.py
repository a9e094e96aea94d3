"""One run's metrics as the diagnosis reads them: a column per metric, its steps, and the run's facts."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from playground.metric_names import PG_CLIPFRAC, PG_CLIPFRAC_LOWER, PPO_KL, VAL
from playground.metrics import STEP

# verl's on-policy shortcut (one mini-batch, one epoch): the ratio is exactly 1, so these are 0 and say nothing.
SHORTCUT_KEYS = (PPO_KL, PG_CLIPFRAC, PG_CLIPFRAC_LOWER)


def on_policy_shortcut(record: Mapping[str, float | None]) -> bool:
    """Whether a step's record shows the on-policy shortcut (`ppo_kl` and `pg_clipfrac` both exactly 0)."""
    return record.get(PPO_KL) == 0 and record.get(PG_CLIPFRAC) == 0


class Log:
    """One run's records as columns (`val/*` carried forward), its steps, and its facts.

    A coarse log (facts `shape_only`: a wandb end-of-run block) knows its metrics' shapes but not their sizes, but
    for each metric's last value (the run summary's) where it is not `unscaled`: only trends read the rest.
    """

    def __init__(self, facts: Mapping[str, Any]):
        self.facts = dict(facts)
        self.steps: list[int] = []
        self.cols: dict[str, list[float | None]] = {}
        self.n = 0
        self.memo: dict[tuple[Any, int], Any] = {}  # (predicate, record index) -> its value
        self._first: dict[str, float] = {}
        self.shape_only = bool(self.facts.get("shape_only"))
        self.unscaled = set(self.facts.get("unscaled") or ())
        self.reading_shape = False  # set while a trend reads values: shapes are what it needs

    def append(self, record: Mapping[str, float]) -> None:
        for key in record:
            if key not in self.cols:
                self.cols[key] = [None] * self.n
        for key, col in self.cols.items():
            value = record.get(key)
            if value is None and key.startswith(f"{VAL}/") and col:
                value = col[-1]  # validation runs every test_freq steps: its last value holds until the next
            col.append(None if value is None else float(value))
        self.steps.append(int(record.get(STEP, self.n)))
        self.n += 1
        self.memo.clear()

    def get(self, key: str, i: int) -> float | None:
        col = self.cols.get(key)
        if col is None:
            return None
        if self.shape_only and not self.reading_shape and (key in self.unscaled or i != self.n - 1):
            return None  # a size the log does not know
        return col[i]

    def first(self, key: str, value_at: Callable[[int], float | None] | None = None) -> float | None:
        """The metric's first finite value (it never changes once there is one); with `value_at`, the first finite
        `value_at(i)` over the records, remembered under `key` (a derived series' start)."""
        if key not in self._first:
            values = self.cols.get(key, []) if value_at is None else map(value_at, range(self.n))
            value = next((v for v in values if v is not None and math.isfinite(v)), None)
            if value is None:
                return None
            self._first[key] = value
        return self._first[key]
