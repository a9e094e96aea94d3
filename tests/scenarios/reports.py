"""What a finished run's `findings.json` says, as the scenario tests read it."""

from __future__ import annotations

import json

from playground.failures import severity
from playground.rundir.runs import read_run_info


def report(run_dir) -> dict:
    return json.loads((run_dir / "findings.json").read_text())


def roots(run_dir) -> list[str]:
    """The root ids of the run's diagnoses, information-level ones left out."""
    return [d["root"]["id"] for d in report(run_dir)["diagnoses"] if d["root"]["severity"] != "info"]


def warnings(run_dir) -> list[str]:
    """The ids of every finding above information level."""
    return [f["id"] for f in report(run_dir)["findings"] if severity(f["id"]) != "info"]


def assert_root_and_stop(run_dir, scenario: str) -> None:
    """A `trainer.stop_on_finding=<scenario>` run: the id is a root of its diagnoses and its finding ended the run
    (out_of_memory ends a run by itself, with status oom)."""
    info = read_run_info(run_dir)
    assert scenario in roots(run_dir), (info, roots(run_dir), warnings(run_dir))
    if scenario != "out_of_memory":
        assert info["stop_reason"] == f"stop_on_finding: {scenario} found"
