"""The llm calibration on real, public verl logs (tests/diagnose/fixtures/real/logs.yaml): every llm calibration entry
still sits beyond what the healthy logs show under the rule's own window (`benchmarks/llm_calibration.py` measures
it). That every log is read right is test_diagnosis_panel.py's."""

from __future__ import annotations

from benchmarks.llm_calibration import NEW_TAG, PANEL, calibration_logs, panel, rule_statistics
from playground.diagnose.calibration import CALIBRATION
from playground.diagnose.readers import read_any

HEALTHY = calibration_logs()


# every log read right (healthy quiet, failures' causes as roots) and the panel's size: test_diagnosis_panel.py


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


def test_the_new_logs_stay_out_of_the_calibration_until_scored():
    """Issue 51: the logs tagged new-51 are on the panel but measure no threshold."""
    new = [e for e in panel() if NEW_TAG in e.get("tags", [])]
    assert new and not {e["file"] for e in new} & {e["file"] for e in HEALTHY}
    assert all(e["verdict"] == "healthy" and NEW_TAG not in e.get("tags", []) for e in HEALTHY)
