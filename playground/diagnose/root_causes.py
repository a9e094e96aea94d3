"""A run's diagnosis read back from its `findings.json`: the findings in diagnosis order, its root cause, its worst
finding, and how severities rank.

The engine writes the document (`playground.diagnose.engine.findings_document`); the explorer and the workshop read
it here, so a run's root cause means the same on every page. The order of severities is the catalogue's
(`failures.SEVERITY_ORDER`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from playground.failures import SEVERITY_ORDER

HEALTHY = "healthy"  # a run's root when it has no warning or critical finding
INCONCLUSIVE = "inconclusive"  # ... and too little evidence for a verdict (a run shorter than the rules' windows)
PROBLEM_SEVERITIES = SEVERITY_ORDER[SEVERITY_ORDER.index("warning"):]  # warning or worse: what a healthy run lacks


def severity_rank(severity: str | None) -> int:
    """A severity's place in the catalogue's order (info 0, warning 1, critical 2); an unknown one ranks as info."""
    return SEVERITY_ORDER.index(severity) if severity in SEVERITY_ORDER else 0


def worst_severity(findings: Iterable[Mapping[str, Any]]) -> str:
    """The gravest severity among the findings; "" when there are none."""
    return max((str(f.get("severity", "info")) for f in findings), key=severity_rank, default="")


def is_problem(finding: Mapping[str, Any]) -> bool:
    """A finding of severity warning or worse."""
    return finding.get("severity") in PROBLEM_SEVERITIES


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
    ranked = sorted(findings, key=lambda f: (-severity_rank(f.get("severity")),
                                             f.get("first_step") or 0))
    return str(ranked[0].get("id", ""))


def run_root(items: Sequence[Mapping[str, Any]]) -> str:
    """A run's root cause from its findings in diagnosis order (`chain`): the root of its gravest diagnosis that holds
    a warning or critical finding (a diagnosis is as grave as its gravest member; the report lists the gravest
    first, so among equals the first); when no finding is a warning or worse, INCONCLUSIVE where the diagnosis had
    too little evidence for a verdict, else HEALTHY."""
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
            rank = max(rank, severity_rank(severity))
    if best == HEALTHY and any((item.get("finding") or {}).get("id") == INCONCLUSIVE for item in items):
        return INCONCLUSIVE
    return best


PENDING_ROOTS = ("running", "?")  # a job still training (no findings.json yet), a mystery run's hidden diagnosis


def job_verdict(items: Sequence[Mapping[str, Any]], status: str, mystery: bool = False) -> tuple[str, bool | None]:
    """A sweep job's root cause (`run_root` of its `chain`) and whether it is healthy; None while it is not judged:
    still training ("running": findings.json is written when a run ends) or a mystery run ("?": kept hidden)."""
    if mystery:
        return "?", None
    if status == "running":
        return "running", None
    root = run_root(items)
    return root, root == HEALTHY
