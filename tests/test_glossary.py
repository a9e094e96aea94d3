"""Tests for `playground/glossary.yaml`: one complete en/zh entry per declared metric, well-formed bands,
and `band_status` giving the metrics guide's verdict on the guide's own example values."""

from __future__ import annotations

import math
import re

import pytest

from playground import metrics
from playground.metrics import ALL_METRICS, GROUP_OF, band_status, glossary, glossary_entry, glossary_notes

STATUSES = {"ok", "warn", "bad"}
PAIR_FIELDS = ("title", "meaning")
OPTIONAL_PAIR_FIELDS = ("verl_note", "range")
TREND_COLUMNS = ("pattern", "meaning", "cause", "action")
CJK = re.compile(r"[\u4e00-\u9fff]")
OVERRIDE = re.compile(r"^[A-Za-z_][\w.]*=\S+$")


def _is_pair(value) -> bool:
    return isinstance(value, dict) and set(value) == {"en", "zh"} and all(isinstance(v, str) for v in value.values())


def test_every_declared_metric_has_an_entry_and_nothing_else():
    assert set(glossary()) == set(ALL_METRICS)
    assert len(glossary()) == len(ALL_METRICS)


@pytest.mark.parametrize("key", ALL_METRICS)
def test_entry_has_required_fields_in_both_languages(key):
    entry = glossary()[key]
    assert entry["group"] == GROUP_OF[key]
    assert re.fullmatch(r"(\d+(\.\d+)?)?", entry["guide_section"])
    for field in PAIR_FIELDS:
        assert _is_pair(entry[field]), field
        assert entry[field]["en"].strip() and entry[field]["zh"].strip(), field
        assert CJK.search(entry[field]["zh"]), f"{field}.zh has no Chinese"
    for field in OPTIONAL_PAIR_FIELDS:
        if field in entry:
            assert _is_pair(entry[field]) and entry[field]["en"].strip() and CJK.search(entry[field]["zh"]), field
    assert isinstance(entry["formula"], str) and entry["formula"].strip()
    assert isinstance(entry["bands"], list)
    assert isinstance(entry["band_on_abs"], bool)
    assert isinstance(entry["trend"], list)
    for trend_row in entry["trend"]:
        assert set(trend_row) == set(TREND_COLUMNS)
        assert all(_is_pair(trend_row[c]) for c in TREND_COLUMNS)
        assert trend_row["pattern"]["en"] and trend_row["pattern"]["zh"]
        assert trend_row["meaning"]["en"] and trend_row["meaning"]["zh"]
    if "example" in entry:
        assert isinstance(entry["example"], str) and entry["example"].strip()
    if "fix" in entry:
        assert all(OVERRIDE.match(tok) for tok in entry["fix"].split()), entry["fix"]
    allowed = {"group", "guide_section", "title", "meaning", "formula", "verl_note", "range", "bands",
               "band_on_abs", "trend", "example", "fix"}
    assert set(entry) <= allowed


@pytest.mark.parametrize("key", [k for k in ALL_METRICS if glossary()[k]["bands"]])
def test_bands_are_ordered_and_meet(key):
    bands = glossary()[key]["bands"]
    for i, band in enumerate(bands):
        assert band["status"] in STATUSES
        assert _is_pair(band["label"]) and band["label"]["en"] and CJK.search(band["label"]["zh"])
        lo, hi = band["lo"], band["hi"]
        assert lo is None or isinstance(lo, (int, float)), lo
        assert hi is None or isinstance(hi, (int, float)), hi
        assert lo is not None or i == 0, "only the first band may be unbounded below"
        assert hi is not None or i == len(bands) - 1, "only the last band may be unbounded above"
        if lo is not None and hi is not None:
            assert lo <= hi
        if i > 0:
            assert band["lo"] == bands[i - 1]["hi"], "bands must meet"


def test_abs_bands_start_at_zero():
    for key, entry in glossary().items():
        if entry["band_on_abs"]:
            assert entry["bands"] and entry["bands"][0]["lo"] == 0.0, key


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        # §1.2 example and §11.4 example 2
        ("actor/pg_clipfrac", 0.12, "ok"),
        ("actor/pg_clipfrac", 0.45, "warn"),
        ("actor/pg_clipfrac", 0.85, "bad"),
        ("actor/pg_clipfrac", 0.02, "warn"),
        # §1.3: ppo_kl is judged on its absolute value (verl's k1 estimate can be negative)
        ("actor/ppo_kl", 0.003, "ok"),
        ("actor/ppo_kl", -0.125, "bad"),
        ("actor/ppo_kl", -0.003, "ok"),
        ("actor/ppo_kl", 0.0001, "warn"),
        # §2.4 table: < 0 very poor, 0.7-0.9 good; §11.4 example 3
        ("critic/vf_explained_var", -0.234, "bad"),
        ("critic/vf_explained_var", 0.512, "warn"),
        ("critic/vf_explained_var", 0.823, "ok"),
        ("critic/vf_explained_var", 0.95, "ok"),
        ("critic/vf_explained_var", float("nan"), "bad"),
        # §1.7: pre-clip norm; NaN/Inf crash
        ("actor/grad_norm", 0.005, "warn"),
        ("actor/grad_norm", 0.845, "ok"),
        ("actor/grad_norm", 25.0, "bad"),
        ("actor/grad_norm", float("inf"), "bad"),
        # §2.1 and §11.4 example 3
        ("critic/vf_loss", 0.832, "ok"),
        ("critic/vf_loss", 45.23, "warn"),
        # §4.2
        ("response_length/clip_ratio", 0.012, "ok"),
        ("response_length/clip_ratio", 0.523, "bad"),
        # §3.3 normal and abnormal example
        ("critic/advantages/mean", -0.023, "ok"),
        ("critic/advantages/mean", 5.234, "bad"),
        ("critic/advantages/max", 2.36, "ok"),
        ("critic/advantages/max", 50.23, "bad"),
        ("critic/advantages/min", -2.28, "ok"),
        ("critic/advantages/min", -45.12, "bad"),
        # §1.5 stage table: < 0.05 overfitting
        ("actor/entropy_loss", 0.03, "warn"),
        ("actor/entropy_loss", 0.4, "ok"),
        # §7.4: 35% MFU is good
        ("perf/mfu/actor", 0.35, "ok"),
        ("perf/mfu/critic", 0.01, "warn"),
        # §1.6, §1.4
        ("actor/kl_loss", 0.005, "ok"),
        ("actor/kl_loss", 0.3, "warn"),
        ("actor/pg_clipfrac_lower", 0.02, "ok"),
    ],
)
def test_band_status_matches_the_guide(key, value, expected):
    assert band_status(key, value) == expected


def test_band_status_through_aliases_and_families():
    assert band_status("actor/entropy", 0.03) == "warn"  # verl >= 0.4 name of actor/entropy_loss
    assert band_status("mfu/actor", 0.45) == "ok"  # verl 0.2 name
    assert glossary_entry("episode/success_rate_cartpole") is glossary()["episode/success_rate"]
    assert glossary_entry("val/pass@4") is glossary()["val/pass@k"]
    assert glossary_entry("val-core/gsm8k/acc/best@8/mean") is glossary()["val/pass@k"]


def test_band_status_is_none_without_bands_or_entry():
    assert band_status("critic/score/mean", 0.5) is None  # task dependent: the guide gives no range
    assert band_status("val/pass@1", float("nan")) is None
    assert band_status("not/a_metric", 1.0) is None


def test_no_entry_for_undeclared_keys():
    assert set(glossary()) == set(ALL_METRICS)
    for key in glossary():
        assert metrics.is_known(key)
    assert glossary_entry("actor/approx_kl") is None


def test_notes_are_bilingual():
    notes = glossary_notes()
    assert len(notes) >= 5
    for note in notes:
        assert _is_pair(note) and note["en"].strip() and CJK.search(note["zh"])
    text = " ".join(n["en"] for n in notes)
    for needed in ("Steps count from 1", "on-policy shortcut", "ALIASES", "§11.3", "§12"):
        assert needed in text, needed


@pytest.mark.parametrize(
    "key",
    ["actor/pg_loss", "actor/pg_clipfrac", "actor/ppo_kl", "actor/entropy_loss", "actor/kl_loss",
     "critic/vf_loss", "critic/vf_clipfrac", "critic/vf_explained_var", "val/pass@k",
     "critic/score/std", "critic/rewards/std", "episode/reward/mean", "world_model/loss"],
)
def test_verl_differences_are_noted(key):
    assert "verl_note" in glossary()[key]


def test_formulas_state_verl_details():
    g = glossary()
    assert "0.5 * agg_loss" in g["critic/vf_loss"]["formula"]
    assert "1e-5" in g["critic/vf_explained_var"]["formula"]
    assert "-20, 20" in g["actor/ppo_kl"]["formula"]
    assert "L2 > L1" in g["actor/pg_clipfrac"]["formula"]
    assert "C(n - c, k) / C(n, k)" in g["val/pass@k"]["formula"]
    assert "PR #4711" in g["actor/pg_loss"]["verl_note"]["en"]
    assert "actor/entropy" in g["actor/entropy_loss"]["verl_note"]["en"]


def test_every_value_is_finite_where_bands_are_closed():
    for key, entry in glossary().items():
        for band in entry["bands"]:
            for edge in (band["lo"], band["hi"]):
                assert edge is None or math.isfinite(edge), key
