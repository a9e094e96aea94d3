"""`rollout_mismatch`: verl's rollout correction warnings (docs/algo/rollout_corr.md's health check: |kl| > 0.1,
chi2_token > 1, effective sample size < 0.3, IS mean outside [0.5, 2]) read from `rollout_corr/*` in logs written for
the test, on 2 of 3 steps."""

from __future__ import annotations

import pytest

from playground.diagnose.engine import diagnose
from playground.metrics import STEP, band_status, family_of, is_known

HEALTHY_CORR = {"rollout_corr/kl": 0.001, "rollout_corr/k3_kl": 0.0005, "rollout_corr/chi2_token": 0.01,
                "rollout_corr/chi2_seq": 0.2, "rollout_corr/rollout_is_mean": 1.0,
                "rollout_corr/rollout_is_eff_sample_size": 0.95}


def steps(n: int = 12, **over) -> list[dict[str, float]]:
    """n steps of a healthy GRPO LLM run that logs rollout_corr/*; `over` replaces a metric by a constant or a function
    of the step (None drops it)."""
    records = []
    for s in range(1, n + 1):
        r = {STEP: float(s), "actor/pg_clipfrac": 0.01, "actor/ppo_kl": 0.002, "actor/entropy": 0.5,
             "actor/grad_norm": 0.4, "actor/pg_loss": 0.004 * (-1) ** s, "critic/score/mean": 0.2 + 0.04 * s,
             "critic/rewards/mean": 0.5, "critic/rewards/std": 0.4, "critic/advantages/mean": 0.0,
             "response_length/mean": 300.0, "response_length/max": 700.0, "response_length/min": 40.0,
             "response_length/clip_ratio": 0.01, **HEALTHY_CORR}
        for key, value in over.items():
            r[key] = value(s) if callable(value) else value
        records.append({k: v for k, v in r.items() if v is not None})
    return records


def test_a_matching_rollout_is_healthy():
    report = diagnose(steps(), family="llm")
    assert "rollout_mismatch" not in report.ids() and "healthy" in report.ids()


@pytest.mark.parametrize("metric, value", [
    ("rollout_corr/kl", 0.15), ("rollout_corr/kl", -0.15), ("rollout_corr/chi2_token", 1.5),
    ("rollout_corr/rollout_is_eff_sample_size", 0.2), ("rollout_corr/rollout_is_mean", 0.4),
    ("rollout_corr/rollout_is_mean", 2.5)])
def test_each_of_verls_warnings_on_the_last_steps_is_a_mismatch(metric, value):
    report = diagnose(steps(**{metric: lambda s: value if s >= 10 else HEALTHY_CORR[metric]}), family="llm")
    assert "rollout_mismatch" in report.ids()
    (finding,) = [f for f in report.findings if f.id == "rollout_mismatch"]
    assert finding.severity == "warning"


@pytest.mark.parametrize("metric, value", [
    ("rollout_corr/kl", 0.09), ("rollout_corr/chi2_token", 0.9), ("rollout_corr/rollout_is_eff_sample_size", 0.35),
    ("rollout_corr/rollout_is_mean", 1.9)])
def test_values_inside_verls_bands_are_not(metric, value):
    assert "rollout_mismatch" not in diagnose(steps(**{metric: value}), family="llm").ids()


def test_one_step_past_a_warning_is_not_enough_and_no_diagnostics_mean_no_verdict():
    blip = steps(**{"rollout_corr/chi2_token": lambda s: 3.0 if s == 6 else 0.01})
    assert "rollout_mismatch" not in diagnose(blip, family="llm").ids()
    bare = steps(**{k: None for k in HEALTHY_CORR})  # the rollout reports no log-probs: the rule is n/a
    assert "rollout_mismatch" not in diagnose(bare, family="llm").ids()


def test_the_diagnostics_are_known_metrics_with_verls_bands():
    for key in ("rollout_corr/kl", "rollout_corr/rollout_is_seq_max_deviation", "rollout_corr/training_ppl",
                "rollout_corr/rollout_rs_seq_mean_k1_fraction_low", "rollout_corr/rollout_rs_masked_fraction"):
        assert is_known(key), key
    assert family_of("rollout_corr/rollout_rs_token_k2_seq_std") == "rollout_corr/rollout_rs_<option>_*"
    assert band_status("rollout_corr/kl", -0.2) == "bad" and band_status("rollout_corr/kl", 0.05) == "ok"
    assert band_status("rollout_corr/chi2_token", 1.2) == "bad"
    assert band_status("rollout_corr/rollout_is_eff_sample_size", 0.25) == "bad"
    assert band_status("rollout_corr/rollout_is_mean", 2.2) == "bad"
    assert band_status("rollout_corr/rollout_is_mean", 1.1) == "ok"


def test_a_verl_v1_bypass_log_with_actor_prefixed_keys_is_read_too():
    """Bypass mode returns rollout_corr/* from the loss; verl V1 logs them under actor/ (verl-today.md 1.4)."""
    from playground.diagnose.readers import parse_verl_text
    from playground.diagnose.sources import diagnose_read

    records = steps(**{"rollout_corr/chi2_token": 2.0})
    lines = [f"step:{int(r[STEP])} - " + " - ".join(
        f"{'actor/' + k if k.startswith('rollout_corr/') else k}:np.float64({v})" for k, v in r.items() if k != STEP)
        for r in records]
    read = parse_verl_text("\n".join(lines) + "\n", name="v1_bypass.log")
    assert "rollout_mismatch" in diagnose_read(read).ids()
