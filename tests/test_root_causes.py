"""Tests for `playground/diagnose/root_causes.py`: a findings.json read back in diagnosis order, its root cause, worst
finding and severities."""

from __future__ import annotations

from playground.diagnose.root_causes import (
    HEALTHY,
    chain,
    is_problem,
    run_root,
    severity_rank,
    worst_finding,
    worst_severity,
)


def test_worst_finding():
    findings = [{"id": "healthy", "severity": "info", "first_step": 1},
                {"id": "b", "severity": "warning", "first_step": 9},
                {"id": "a", "severity": "warning", "first_step": 3}]
    assert worst_finding(findings) == "a"
    assert worst_finding([]) == ""


def _f(fid, severity="warning", first=5):
    return {"id": fid, "severity": severity, "first_step": first, "last_step": 60, "rule": fid}


def test_run_root_is_the_gravest_diagnosis_root_not_the_worst_finding():
    report = {"findings": [], "diagnoses": [
        {"root": _f("lr_too_high"), "consequences": [_f("gradient_explosion", "critical", 9)]},
        {"root": _f("critic_undertrained", "critical", 2), "consequences": []},
        {"root": _f("healthy", "info", 1), "consequences": []}]}
    # both diagnoses hold a critical finding: the first (the report's order) wins, though its root is a warning
    assert run_root(chain(report)) == "lr_too_high"
    assert worst_finding(report["diagnoses"][0]["consequences"] + [report["diagnoses"][1]["root"]]) == (
        "critic_undertrained")
    report["diagnoses"][0]["consequences"] = []  # now the critical one is graver
    assert run_root(chain(report)) == "critic_undertrained"
    assert run_root(chain({"diagnoses": [{"root": _f("healthy", "info"), "consequences": []}],
                           "findings": [_f("low_mfu", "info")]})) == HEALTHY
    assert run_root([]) == HEALTHY  # no findings: no warning
    # an older report (no diagnoses): its findings alone, the gravest first
    assert run_root(chain({"findings": [_f("kl_drift"), _f("training_crash", "critical", 30)]})) == (
        "training_crash")


def test_severities_rank_in_the_catalogue_order():
    assert [severity_rank(s) for s in ("info", "warning", "critical", None, "odd")] == [0, 1, 2, 0, 0]
    assert worst_severity([{"severity": "warning"}, {"severity": "critical"}, {}]) == "critical"
    assert worst_severity([]) == ""
    assert is_problem({"severity": "warning"}) and not is_problem({"severity": "info"}) and not is_problem({})
