"""Artifacts: what a log shows that is no failure, or that hides one (rules.yaml's `artifacts`), and what a finding
leans on (leans.yaml: a metric verl computes otherwise than it seems, noted on the finding itself).

A rule reports a catalogue id; an artifact only adds a note to the report, naming the verl code or issue that explains
the numbers (the on-policy shortcut's zeros, V1's clip_ratio, the pre-clip gradient norm), so that nobody reads them
as convergence, truncation or an explosion. Each is judged once, on every step of the log that has its metrics.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from playground.diagnose import catalogue
from playground.diagnose.calibration import FAMILIES, resolved_thresholds
from playground.diagnose.conditions import Node, compile_condition
from playground.diagnose.finding import Finding
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


# ---- what a finding leans on (leans.yaml): a note on the finding itself, where its evidence reads such a metric ---
LEANS = Path(__file__).with_name("leans.yaml")
WHEN = ("always", "version_uncertain", "megatron")  # leans.yaml's `when`: the log facts that make a note hold


@functools.lru_cache(maxsize=1)
def leans() -> tuple[dict, ...]:
    """leans.yaml's notes.

    Raises:
        ValueError: a note without its fields, or with a `when` outside `WHEN`.
    """
    notes = tuple(yaml.safe_load(LEANS.read_text(encoding="utf-8"))["notes"])
    for note in notes:
        missing = {"name", "metrics", "when", "reference", "note"} - set(note)
        if missing or note["when"] not in WHEN or set(note["note"]) != {"en", "zh"}:
            raise ValueError(f"{LEANS.name}: note {note.get('name')!r}: needs name, metrics, reference, a `when` in "
                             f"{WHEN} and an en/zh note (missing: {sorted(missing)})")
    return notes


def _holds(when: str, facts: Mapping[str, Any]) -> bool:
    if when == "version_uncertain":  # an outside log whose version is unknown or older than 0.4
        return facts.get("verl_version") in ("older", "unknown")
    if when == "megatron":
        return "megatron" in str(facts.get("backend") or "").lower()
    return True


def finding_artifacts(evidence: Sequence[Mapping[str, Any]], facts: Mapping[str, Any]) -> list[dict]:
    """The notes of leans.yaml that hold for a finding: its evidence reads one of the note's metrics and the log's
    facts make it hold. Each: {"name", "en", "zh", "reference"}."""
    read = " ".join(str(item.get("metric", "")) for item in evidence)
    out = []
    for spec in leans():
        if not any(metric in read for metric in spec["metrics"]) or not _holds(spec["when"], facts):
            continue
        version = spec.get("versions", {}).get(facts.get("verl_version"), {})
        backend = facts.get("backend") or ""
        out.append({"name": spec["name"], "reference": spec["reference"],
                    **{lang: spec["note"][lang].format(version=version.get(lang, ""), backend=backend)
                       for lang in ("en", "zh")}})
    return out


def attach(findings: Sequence[Finding], facts: Mapping[str, Any]) -> None:
    """Give each finding the notes of what its evidence leans on (`finding_artifacts`)."""
    for finding in findings:
        finding.artifacts = finding_artifacts(finding.evidence, facts)
