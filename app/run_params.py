"""A run's parameters as its Hydra overrides say them: as a dict, what runs differing only by seed share, what
differs between runs, and the command that reruns a run with a fix.

No Streamlit and no file access here; the overrides are read by `playground.config.overrides` (Hydra's grammar).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from playground.config.overrides import key_values


def is_seed(key: str) -> bool:
    """`seed`, `trainer.seed`, ...: an override that picks the random seed."""
    return key == "seed" or key.endswith(".seed")


def seed_group_key(overrides: Iterable[str], extra: Sequence[Any] = ()) -> str:
    """What a run is, seed aside: its overrides without the seed, sorted (runs with the same key differ by seed)."""
    params = {k: v for k, v in key_values(overrides).items() if not is_seed(k)}
    return " ".join([*(str(e) for e in extra if e), *(f"{k}={v}" for k, v in sorted(params.items()))]) or "(defaults)"


def differing_params(overrides_by_run: Mapping[str, Iterable[str]]) -> pd.DataFrame:
    """The overrides that differ between runs (only those), one row per run; an absent key shows as "—"."""
    parsed = {run: key_values(ov) for run, ov in overrides_by_run.items()}
    keys = sorted({k for p in parsed.values() for k in p})
    differ = [k for k in keys if len({p.get(k) for p in parsed.values()}) > 1]
    return pd.DataFrame([{k: p.get(k, "—") for k in differ} for p in parsed.values()], index=list(parsed),
                        columns=differ)
