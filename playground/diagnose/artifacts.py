"""Artifacts: what a log shows that is no failure, or that hides one (rules.yaml's `artifacts`).

A rule reports a catalogue id; an artifact only adds a note to the report, naming the verl code or issue that explains
the numbers (the on-policy shortcut's zeros, V1's clip_ratio, the pre-clip gradient norm), so that nobody reads them
as convergence, truncation or an explosion. Each is judged once, on every step of the log that has its metrics.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from playground.diagnose import catalogue
from playground.diagnose.calibration import FAMILIES, resolved_thresholds
from playground.diagnose.conditions import Node, compile_condition
from playground.diagnose.log import Log
from playground.diagnose.series import Series, compile_series


@dataclass(frozen=True)
class Artifact:
    name: str
    needs: tuple[Series, ...]
    when: Node
    note: dict[str, str]  # {"en", "zh"}
    reference: str


@functools.lru_cache(maxsize=len(FAMILIES))
def artifacts(family: str) -> tuple[Artifact, ...]:
    """The artifacts of `rules.yaml` that apply to the family, compiled."""
    data = catalogue.document()
    defs, guards = data.get("series", {}), data.get("guards", {})
    return tuple(
        Artifact(name=spec["name"], needs=tuple(compile_series(m, defs) for m in spec.get("metrics", [])),
                 when=compile_condition(spec["when"], defs, resolved_thresholds(spec, family), guards),
                 note=dict(spec["note"]), reference=spec["reference"])
        for spec in data.get("artifacts", []) if family in spec.get("families", FAMILIES))


def artifact_notes(log: Log, family: str, lang: str = "en") -> list[str]:
    """One note per artifact the log shows: `name: what it means (reference)`."""
    out = []
    for artifact in artifacts(family):
        idx = [i for i in range(log.n) if all(s.value(log, i) is not None for s in artifact.needs)]
        if idx and artifact.when.over(log, idx) is True:
            out.append(f"{artifact.name}: {artifact.note[lang]} ({artifact.reference})")
    return out
