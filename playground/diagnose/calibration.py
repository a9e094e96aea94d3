"""A task family's thresholds where they differ from the metrics guide's, read from `rules.yaml` (`calibrated`).

The guide's ranges were written for LLM training with verl (family "llm": verl logs use most of them unchanged). A
family has its own value of a rule's threshold only where its healthy runs measurably sit outside the guide's range;
`rules.yaml` keeps each such value beside the guide's, with the healthy distribution it was derived from, and names
the runs each family was measured on (`measured_on`) and the matching per-step bands the explorer draws instead of
the glossary's (`family_bands`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from playground.diagnose import catalogue
from playground.diagnose.schema import FAMILIES as FAMILIES
from playground.metrics import band_in, fmt, glossary_entry, status_in_bands


@dataclass(frozen=True)
class Calibration:
    family: str  # gym | token | llm
    rule: str  # a rule name in rules.yaml
    threshold: str  # the threshold's name in that rule
    value: float  # the family's threshold
    guide: float  # the guide's value
    healthy: str  # the measured healthy distribution it was derived from
    seeds: int  # how many seeds (playground families) or real logs (llm) that distribution covers
    source: str  # where it was measured


def _entries() -> tuple[Calibration, ...]:
    document = catalogue.document()
    return tuple(
        Calibration(family, rule["name"], name, float(entry["value"]), float(rule["thresholds"][name]),
                    entry["measured"], int(entry["seeds"]), document["measured_on"][family])
        for rule in document["rules"] for name, by_family in (rule.get("calibrated") or {}).items()
        for family, entry in by_family.items())


# A value that differs from the guide's replaces it for its family; one equal to it records that the guide's value
# was measured to hold there (the same tests re-check both).
CALIBRATION: tuple[Calibration, ...] = tuple(e for e in _entries() if e.value != e.guide)
GUIDE_CHECKED: tuple[Calibration, ...] = tuple(e for e in _entries() if e.value == e.guide)

_BY_KEY = {(c.family, c.rule, c.threshold): c for c in CALIBRATION}


def calibrated(family: str, rule: str, threshold: str) -> Calibration | None:
    """The family's entry for a rule's threshold, or None (the guide's value applies)."""
    return _BY_KEY.get((family, rule, threshold))


def resolved_thresholds(rule: Mapping[str, Any], family: str,
                        override: Mapping[str, float] | None = None) -> dict[str, tuple[float, str]]:
    """A rule's thresholds for a family, name -> (value, how evidence writes it): the guide's value, or the family's
    calibrated one; `override` (name -> value) replaces them for a what-if (benchmarks.heldout_split).

    Raises:
        ValueError: `override` names a threshold the rule does not have.
    """
    override = dict(override or {})
    guides = rule.get("thresholds") or {}
    if unknown := sorted(set(override) - set(guides)):
        raise ValueError(f"rule {rule['name']!r} has no threshold {', '.join(unknown)}: it has {', '.join(guides)}")
    out = {}
    for name, guide in guides.items():
        entry = calibrated(family, rule["name"], name)
        if name in override:
            value = float(override[name])
            out[name] = (value, f"{fmt(value)} (override; guide {fmt(float(guide))})")
        elif entry is None:
            out[name] = (float(guide), fmt(float(guide)))
        else:
            out[name] = (entry.value, f"{fmt(entry.value)} ({family} calibration; guide {fmt(float(guide))})")
    return out


# The per-step bands the explorer draws for a family instead of the glossary's (rules.yaml's `family_bands`).
FAMILY_BANDS: dict[str, dict[str, dict]] = catalogue.document().get("family_bands", {})


def family_band_status(key: str, value: float, family: str) -> str | None:
    """`metrics.band_status` with the family's own bands where it has them."""
    return status_in_bands(bands_entry(key, family), value)


def family_band(key: str, value: float, family: str) -> dict | None:
    """The band (status and label) `value` falls in, with the family's own bands where it has them."""
    return band_in(bands_entry(key, family), value)


def bands_entry(key: str, family: str) -> dict | None:
    """The entry whose bands judge `key` for a task family: the family's calibrated one, else the guide's;
    None when neither gives bands."""
    entry = FAMILY_BANDS.get(family, {}).get(key) or glossary_entry(key)
    return entry if entry and entry.get("bands") else None


def has_band(key: str, family: str) -> bool:
    return bands_entry(key, family) is not None


def ok_range(key: str, family: str) -> str:
    """The family's (or the guide's) ok range of a metric in words, e.g. "ok 0.05 to 0.3"; "" if none."""
    entry = bands_entry(key, family)
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
