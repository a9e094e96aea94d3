"""Tests for `app/comparison.py`: a comparison (`playground.diagnose.compare`) of records written here, shaped for the
Runs page and the Lab."""

from __future__ import annotations

import json
import math

from playground.diagnose.compare import compare_records
from playground.metric_names import ACTOR_GRAD_NORM, PG_CLIPFRAC, PPO_KL, STEP

import comparison
import series
from app_helpers import spec_title, units

STEPS = 12
STRATEGY = {"actor_rollout_ref": {"actor": {"strategy": "fsdp2", "optim": {"lr": 1e-6}}}}
MEGATRON = {"actor_rollout_ref": {"actor": {"strategy": "megatron", "optim": {"lr": 2e-6}}}}


def _records(jump_at: int | None = None, kl_nan_at: int | None = None) -> list[dict[str, float]]:
    """A little deterministic noise; from `jump_at` on pg_clipfrac jumps to 0.6 and grad_norm a little less far."""
    out = []
    for s in range(1, STEPS + 1):
        wobble = math.sin(3.7 * s)
        record = {STEP: float(s), PG_CLIPFRAC: 0.10 + 0.01 * wobble, PPO_KL: 0.002 + 0.0002 * wobble,
                  ACTOR_GRAD_NORM: 1.0 + 0.05 * wobble}
        if jump_at is not None and s >= jump_at:
            record[PG_CLIPFRAC], record[ACTOR_GRAD_NORM] = 0.6, 1.6
        if kl_nan_at is not None and s >= kl_nan_at:
            record[PPO_KL] = math.nan
        out.append(record)
    return out


def test_the_headline_says_the_first_divergence_or_that_there_is_none():
    diverged = compare_records(_records(), _records(jump_at=8))
    assert comparison.headline(diverged, "en") == (
        f"First divergence at **step 8**, on 2 metric(s), most divergent first ({STEPS} shared steps, 1–{STEPS}):")
    assert "第 8 步" in comparison.headline(diverged, "zh")
    same = compare_records(_records(), _records())
    assert comparison.headline(same, "en").startswith("No divergence")
    apart = compare_records(_records(), [{**r, STEP: r[STEP] + 100} for r in _records()])
    assert comparison.headline(apart, "en") == "No step in common: nothing to compare."


def test_the_divergence_table_ranks_the_metrics_and_names_a_nan():
    c = compare_records(_records(), _records(jump_at=8, kl_nan_at=10))
    table = comparison.divergence_table(c.at_divergence, "en")
    assert list(table.columns) == ["metric", "step", "A", "B", "|A−B| / tolerance"]  # no artefact: no column
    assert list(table["metric"]) == [PG_CLIPFRAC, ACTOR_GRAD_NORM]  # clipfrac jumps further, in its tolerances
    assert list(table["step"]) == [8, 8] and table["B"].iloc[0] == "0.6"
    ratios = [float(r.rstrip("×")) for r in table["|A−B| / tolerance"]]
    assert ratios == sorted(ratios, reverse=True) and ratios[-1] > 1
    later = comparison.divergence_table(c.later, "en")
    assert later.to_dict("records") == [{"metric": PPO_KL, "step": 10, "A": later["A"].iloc[0], "B": "nan",
                                         "|A−B| / tolerance": "NaN"}]
    assert list(comparison.divergence_table(c.at_divergence, "zh").columns)[0] == "指标"


def test_the_config_difference_is_dotted_keys_or_none_without_a_config():
    c = compare_records(_records(), _records(), config_a=STRATEGY, config_b=MEGATRON)
    table = comparison.config_table(c, "en")
    assert table.to_dict("records") == [
        {"config key": "actor_rollout_ref.actor.optim.lr", "A": "1e-06", "B": "2e-06"},
        {"config key": "actor_rollout_ref.actor.strategy", "A": "fsdp2", "B": "megatron"}]
    assert comparison.config_table(compare_records(_records(), _records(), config_a=STRATEGY, config_b=STRATEGY),
                                   "en").empty
    assert comparison.config_table(compare_records(_records(), _records(), config_a=STRATEGY), "en") is None


def test_artefact_notes_are_in_the_language_asked_for():
    c = compare_records(_records(), _records(jump_at=8), config_a=STRATEGY, config_b=MEGATRON)
    en, zh = comparison.artefact_notes(c, "en"), comparison.artefact_notes(c, "zh")
    assert en == [f"**backend**: {c.artefacts[0].note}"] and "verl #4710" in en[0]
    assert zh[0].startswith("**backend**: actor_rollout_ref.actor.strategy：fsdp2 对 megatron") and "3 倍" in zh[0]
    assert dict(zip(comparison.divergence_table(c.at_divergence, "en")["metric"],
                    comparison.divergence_table(c.at_divergence, "en")["may be the artefact"])) == {
        PG_CLIPFRAC: "", ACTOR_GRAD_NORM: "backend"}  # Megatron's grad norm is about 3x FSDP's


def test_the_diverging_metrics_are_listed_top_first():
    c = compare_records(_records(), _records(jump_at=8, kl_nan_at=10))
    assert comparison.diverging_metrics(c) == [PG_CLIPFRAC, ACTOR_GRAD_NORM, PPO_KL]
    assert comparison.top_metric(c) == PG_CLIPFRAC and comparison.top_metric(compare_records(_records(),
                                                                                              _records())) is None


def test_the_chart_draws_the_top_metric_of_both_runs_with_a_rule_at_the_divergence():
    a, b = _records(), _records(jump_at=8)
    c = compare_records(a, b)
    frames = {"before": series.records_frame(a), "after": series.records_frame(b)}
    spec = comparison.chart_spec(frames, c, "en")
    assert spec_title(spec) == f"{PG_CLIPFRAC}: the most divergent at step 8"
    data = {name: rows for name, rows in spec["datasets"].items()}
    drawn = [r for rows in data.values() for r in rows if "series" in r]
    assert {r["series"] for r in drawn} == {"before", "after"} and len(drawn) == 2 * STEPS
    marks = [r for rows in data.values() for r in rows if set(r) == {"x", "text"}]
    assert marks == [{"x": 8.0, "text": "diverges at step 8"}]
    rules = [u for u in units(spec) if (u["mark"]["type"] if isinstance(u["mark"], dict) else u["mark"]) == "rule"]
    assert rules, "no rule drawn"
    scales = {json.dumps(u["encoding"]["color"]["scale"]) for u in units(spec)
              if u.get("encoding", {}).get("color", {}).get("field") == "series"}
    assert [json.loads(s)["domain"] for s in scales] == [["before", "after"]]  # A the first colour, B the second
    assert comparison.chart_spec(frames, compare_records(a, a), "en") is None
    later = comparison.chart_spec(frames, compare_records(a, _records(jump_at=8, kl_nan_at=10)), "en", PPO_KL)
    assert spec_title(later) == PPO_KL  # another diverging metric: its rule at its own first divergence
    assert [r for rows in later["datasets"].values() for r in rows if set(r) == {"x", "text"}] == [
        {"x": 10.0, "text": "diverges at step 10"}]
    assert comparison.chart_spec(frames, c, "en", PPO_KL) is None  # kl does not diverge between a and b
    unlogged = {name: frame.drop(columns=PG_CLIPFRAC) for name, frame in frames.items()}
    assert comparison.chart_spec(unlogged, c, "en") is None  # frames without the metric: nothing to draw
