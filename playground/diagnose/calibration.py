"""The one place where a task family's thresholds differ from the metrics guide's, each with its measurement.

The guide's ranges were written for LLM training with verl (family "llm": verl logs use them unchanged). A
family may override a rule's threshold only where its healthy runs measurably sit outside the guide's range;
every entry names the healthy distribution it was derived from, how many seeds, and where it was measured.
`FAMILY_BANDS` are the matching per-step bands the explorer draws instead of the glossary's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from playground.metrics import band_status, glossary_entry

FAMILIES = ("gym", "token", "llm")


@dataclass(frozen=True)
class Calibration:
    family: str  # gym | token
    rule: str  # a rule name in rules.yaml
    threshold: str  # the threshold's name in that rule
    value: float  # the family's threshold
    guide: float  # the guide's value it replaces
    healthy: str  # the measured healthy distribution it was derived from
    seeds: int  # how many seeds that distribution covers
    source: str  # where it was measured


_GYM = ("playground CartPole, scenario=healthy, seeds 1-6 x 100 steps (600 steps; defaults of commit a626bcd), "
        "measured by the diagnosis helper; CleanRL CartPole (shared/reference/cleanrl-baseline.md) agrees")
_TOKEN = "shared/reference/token-feasibility.md (tiny GPT, reverse k=5, from an SFT base)"

CALIBRATION: tuple[Calibration, ...] = (
    Calibration("gym", "lr_too_high", "kl_high", 0.03, 0.05,
                "|ppo_kl| median 5.9e-4, p90 3.2e-3, max 0.012 (about 3x the healthy max); lr x5 still learns "
                "with max 0.025", 6, _GYM),
    Calibration("gym", "lr_too_high", "clipfrac_high", 0.2, 0.5,
                "pg_clipfrac median 0, p90 0.016, max 0.068 (about 3x the healthy max); lr x5 still learns with "
                "max 0.13", 6, _GYM),
    Calibration("gym", "lr_too_low", "kl_low", 5e-5, 1e-3,
                "|ppo_kl| p10 6.8e-5, median 5.9e-4: the guide's 1e-3 floor is above most healthy steps (7.8% "
                "of healthy steps are below 5e-5; with lr/100, 98.7% are, median 6.5e-6: k1 scales ~lr)", 6, _GYM),
    Calibration("gym", "critic_undertrained", "ev_bad", -1.0, 0.0,
                "vf_explained_var median 0.023, p10 -0.021, min -0.14 (seed 1 sits near 0 all run): EV < 0 alone "
                "is routine; the EV < 0.3 with value-gap condition holds in at most 3 of 10 steps (rule: 6; "
                "critic lr/1000: 10 of 10)", 6, _GYM),
    Calibration("token", "lr_too_high", "clipfrac_high", 0.01, 0.5,
                "healthy PPO lr 1e-4: clipfrac <= 0.004; GRPO at lr x30 peaks at only 0.013-0.04 (most tokens "
                "have zero advantage), so 0.5 is unreachable", 1, _TOKEN),
    Calibration("token", "lr_too_high", "kl_high", 0.02, 0.05,
                "healthy PPO lr 1e-4: ppo_kl <= 0.0035; GRPO lr 1e-4 step 1: 0.0005; lr x30: 0.045-0.66", 1, _TOKEN),
    Calibration("token", "lr_too_low", "kl_low", 1e-5, 1e-3,
                "healthy GRPO lr 1e-4 step-1 ppo_kl 0.0005; lr/100 should give ~5e-6 (k1 scales ~lr)", 1, _TOKEN),
)

_BY_KEY = {(c.family, c.rule, c.threshold): c for c in CALIBRATION}


def calibrated(family: str, rule: str, threshold: str) -> Calibration | None:
    """The family's entry for a rule's threshold, or None (the guide's value applies)."""
    return _BY_KEY.get((family, rule, threshold))


# Per-step bands (the glossary's schema: first band containing the value wins; band_on_abs judges |value|).
FAMILY_BANDS: dict[str, dict[str, dict]] = {
    "gym": {  # from the healthy CartPole numbers above
        "actor/ppo_kl": {"band_on_abs": True, "bands": [
            {"lo": 0.0, "hi": 0.015, "status": "ok"}, {"lo": 0.015, "hi": 0.03, "status": "warn"},
            {"lo": 0.03, "hi": None, "status": "bad"}]},
        "actor/pg_clipfrac": {"bands": [
            {"lo": 0.0, "hi": 0.1, "status": "ok"}, {"lo": 0.1, "hi": 0.2, "status": "warn"},
            {"lo": 0.2, "hi": None, "status": "bad"}]},
        "critic/vf_explained_var": {"bands": [
            {"lo": None, "hi": -1.0, "status": "warn"}, {"lo": -1.0, "hi": None, "status": "ok"}]},
    },
    "token": {  # from the tiny-GPT numbers above
        "actor/ppo_kl": {"band_on_abs": True, "bands": [
            {"lo": 0.0, "hi": 0.01, "status": "ok"}, {"lo": 0.01, "hi": 0.02, "status": "warn"},
            {"lo": 0.02, "hi": None, "status": "bad"}]},
        "actor/pg_clipfrac": {"bands": [
            {"lo": 0.0, "hi": 0.005, "status": "ok"}, {"lo": 0.005, "hi": 0.01, "status": "warn"},
            {"lo": 0.01, "hi": None, "status": "bad"}]},
    },
}


def family_band_status(key: str, value: float, family: str) -> str | None:
    """`metrics.band_status` with the family's own bands where it has them."""
    entry = FAMILY_BANDS.get(family, {}).get(key)
    if entry is None:
        return band_status(key, value)
    if not math.isfinite(value):
        return "bad"
    v = abs(value) if entry.get("band_on_abs") else value
    for band in entry["bands"]:
        lo = -math.inf if band["lo"] is None else band["lo"]
        hi = math.inf if band["hi"] is None else band["hi"]
        if lo <= v <= hi:
            return band["status"]
    return None


def _bands(key: str, family: str) -> dict | None:
    entry = FAMILY_BANDS.get(family, {}).get(key) or glossary_entry(key)
    return entry if entry and entry.get("bands") else None


def has_band(key: str, family: str) -> bool:
    return _bands(key, family) is not None


def ok_range(key: str, family: str) -> str:
    """The family's (or the guide's) ok range of a metric in words, e.g. "ok 0.05 to 0.3"; "" if none."""
    entry = _bands(key, family)
    if entry is None:
        return ""
    merged: list[list] = []  # adjacent ok bands read as one range
    for band in (b for b in entry["bands"] if b["status"] == "ok"):
        if merged and merged[-1][1] is not None and merged[-1][1] == band.get("lo"):
            merged[-1][1] = band.get("hi")
        else:
            merged.append([band.get("lo"), band.get("hi")])
    parts = []
    for lo, hi in merged:
        if lo is not None and hi is not None:
            parts.append(f"{lo:g} to {hi:g}")
        elif lo is not None or hi is not None:
            parts.append(f">= {lo:g}" if lo is not None else f"<= {hi:g}")
    joined = ", ".join(parts)
    return f"ok {'|x| ' if entry.get('band_on_abs') else ''}{joined}" if parts else ""
