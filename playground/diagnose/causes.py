"""From findings to diagnoses: a root cause and the consequences it explains, through the links in `rules.yaml`.

A finding explains another when a link leads from its id to the other's (directly or through further links) and the
other is still present when it appears (`explains`). The earliest finding no other one explains is a root (the
guide's §11.2 checklist order breaking ties: learning rate, reward signal, critic, batch size); it takes every
finding it explains, and the rest are grouped the same way, so a finding explained by two roots is told once, under
the first. Independent problems stay separate diagnoses, the gravest first; info findings (states, not failures)
come after, one each.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from playground.diagnose import catalogue
from playground.diagnose.finding import Finding
from playground.failures import SEVERITY_ORDER


@dataclass
class Diagnosis:
    """One root cause and what it explains. `root` and `consequences` are the engine's findings."""

    root: Finding
    consequences: list[Finding] = field(default_factory=list)

    def ids(self) -> list[str]:
        return [self.root.id, *(f.id for f in self.consequences)]

    def to_dict(self) -> dict:
        return {"root": self.root.to_dict(), "consequences": [f.to_dict() for f in self.consequences]}


@functools.lru_cache(maxsize=1)
def effects() -> dict[str, frozenset[str]]:
    """id -> every id it produces, directly or through further links (the transitive closure of `links`)."""
    direct: dict[str, set[str]] = {}
    for link in catalogue.document().get("links", []):
        direct.setdefault(link["cause"], set()).update(link["effects"])

    def reach(fid: str, seen: frozenset[str]) -> set[str]:
        out = set()
        for effect in direct.get(fid, ()):
            if effect not in seen:
                out |= {effect} | reach(effect, seen | {effect})
        return out

    return {fid: frozenset(reach(fid, frozenset({fid}))) for fid in direct}


@functools.lru_cache(maxsize=1)
def checklist() -> tuple[dict, ...]:
    """The guide's §11.2 checks, in order (`rules.yaml`'s `checklist`)."""
    return tuple(catalogue.document().get("checklist", []))


def check_rank(finding_id: str) -> int:
    """The position of the first §11.2 check that looks for this id (ids no check names come last)."""
    return next((i for i, check in enumerate(checklist()) if finding_id in check["ids"]), len(checklist()))


def explains(cause: Finding, effect: Finding) -> bool:
    """A link leads from the cause's id to the effect's, and the effect is still there when the cause appears: at the
    start of the window that showed the cause (its signature takes a window to show, and was under way from there;
    a consequence may show a few steps before it)."""
    return effect.id in effects().get(cause.id, ()) and effect.last_step >= cause.under_way_from


def _order(finding: Finding) -> tuple[int, int, str]:
    return finding.first_step, check_rank(finding.id), finding.id


def group(findings: Sequence) -> list[Diagnosis]:
    """The findings as diagnoses: problems (warning, critical) by root cause, then each info finding alone."""
    remaining = sorted((f for f in findings if f.severity != "info"), key=_order)
    diagnoses = []
    while remaining:
        unexplained = [f for f in remaining if not any(explains(g, f) for g in remaining if g is not f)]
        # none unexplained: the rest hangs on a cycle of findings explaining each other; its earliest member is the
        # root (a finding that explains none of the rest is no member of it)
        in_cycle = [f for f in remaining if any(explains(f, g) for g in remaining if g is not f)]
        root = (unexplained or in_cycle or remaining)[0]
        consequences = [f for f in remaining if f is not root and explains(root, f)]
        diagnoses.append(Diagnosis(root, consequences))
        remaining = [f for f in remaining if f is not root and f not in consequences]
    diagnoses.sort(key=lambda d: (-max(SEVERITY_ORDER.index(f.severity) for f in (d.root, *d.consequences)),
                                  *_order(d.root)))  # the gravest first
    return diagnoses + [Diagnosis(f) for f in sorted((f for f in findings if f.severity == "info"), key=_order)]


def ruled_out(found_ids: Iterable[str], judged_ids: Iterable[str]) -> list[dict]:
    """The §11.2 checks that passed: the log let a rule judge one of their ids, and none of them was found."""
    found, judged = set(found_ids), set(judged_ids)
    return [{"name": check["name"], "title": dict(check["title"])} for check in checklist()
            if not found & set(check["ids"]) and judged & set(check["ids"])]
