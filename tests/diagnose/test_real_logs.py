"""The engine on real, public verl logs (tests/diagnose/fixtures/real/logs.yaml): healthy runs give no warning,
failure runs name their reporter's symptom as the root of a diagnosis, and every llm calibration entry still sits
beyond what the healthy logs show under the rule's own window (`benchmarks/llm_calibration.py` measures it)."""

from __future__ import annotations

import pytest

from benchmarks.llm_calibration import PANEL, panel, rule_statistics
from playground.diagnose.calibration import CALIBRATION
from playground.diagnose.readers import read_any
from playground.diagnose.sources import diagnose_read

LOGS = panel()
HEALTHY = [e for e in LOGS if e["verdict"] == "healthy"]
FAILURES = [e for e in LOGS if e["verdict"] == "failure"]


def test_the_panel_has_ten_logs_six_of_them_healthy_each_with_its_source():
    """Twelve until two logs from sources issue 25 holds out (Bihan/dstack-configs, YANGZHOU66666's notes) left it."""
    assert len(LOGS) >= 10 and len(HEALTHY) >= 6
    sources = (PANEL / "SOURCES.md").read_text(encoding="utf-8")
    for entry in LOGS:
        assert (PANEL / entry["file"]).is_file() and f"### {entry['file']}" in sources, entry["file"]


@pytest.mark.parametrize("entry", HEALTHY, ids=lambda e: e["file"])
def test_a_healthy_real_run_gives_no_warning(entry):
    read = read_any(PANEL / entry["file"])
    assert read.records, read.problems
    report = diagnose_read(read)
    assert [f.id for f in report.findings if f.severity != "info"] == [], report.notes


@pytest.mark.parametrize("entry", FAILURES, ids=lambda e: e["file"])
def test_a_failing_real_run_names_its_reporters_symptom_as_a_root(entry):
    report = diagnose_read(read_any(PANEL / entry["file"]))
    assert entry["root"] in report.roots(), (report.roots(), report.ids())


STATISTIC = {("lr_too_low", "kl_low"): "lr_too_low.kl_low (max allowed)",
             ("grad_clip_saturation", "clipped"): "grad_clip_saturation.clipped (min allowed)",
             ("unstable_policy_loss", "swing"): "unstable_policy_loss.swing (min allowed)",
             ("kl_drift_loss", "kl_ref_high"): "kl_drift_loss.kl_ref_high (min allowed)",
             ("kl_drift_reward", "kl_ref_high"): "kl_drift_reward.kl_ref_high (min allowed)",
             ("overly_deterministic", "rel_low"): "overly_deterministic.rel_low (max allowed)",
             ("advantage_not_normalized", "spread_high"): "advantage_not_normalized.spread_high (min allowed)"}


def test_every_llm_calibration_sits_beyond_what_the_healthy_logs_allow():
    measured: dict[str, list[float]] = {}
    for entry in HEALTHY:
        read = read_any(PANEL / entry["file"])
        if read.kind == "verl_console":  # a wandb block's sparkline sizes are not the run's
            for name, value in rule_statistics(read.records).items():
                measured.setdefault(name, []).append(value)
    for entry in (e for e in CALIBRATION if e.family == "llm"):
        name = STATISTIC[(entry.rule, entry.threshold)]
        values = measured[name]
        if "max allowed" in name:
            assert entry.value < min(values) < entry.guide, (name, entry.value, values)
        else:
            assert entry.value > max(values) > entry.guide, (name, entry.value, values)
