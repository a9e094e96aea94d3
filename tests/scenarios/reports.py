"""What a finished run's `findings.json` says, as the scenario tests read it."""

from __future__ import annotations

import json

from playground.failures import severity


def report(run_dir) -> dict:
    return json.loads((run_dir / "findings.json").read_text())


def roots(run_dir) -> list[str]:
    """The root ids of the run's diagnoses, information-level ones left out."""
    return [d["root"]["id"] for d in report(run_dir)["diagnoses"] if d["root"]["severity"] != "info"]


def warnings(run_dir) -> list[str]:
    """The ids of every finding above information level."""
    return [f["id"] for f in report(run_dir)["findings"] if severity(f["id"]) != "info"]
