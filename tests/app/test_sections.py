"""Tests for `app/sections.py`: which metrics go in which panel (drawing is covered by the view tests)."""

from __future__ import annotations

import pandas as pd
import pytest

import sections
import widgets


@pytest.fixture(autouse=True)
def english(monkeypatch):
    monkeypatch.setattr(widgets, "lang", lambda: "en")


def test_metrics_by_group_places_every_key():
    columns = ["training/global_step", "actor/pg_loss", "episode/success_rate_cartpole", "val/pass@4",
               "critic/score/mean", "my/custom"]
    assert sections.metrics_by_group(columns) == {
        "actor": ["actor/pg_loss"], "reward": ["critic/score/mean"], "episode": ["episode/success_rate_cartpole"],
        "val": ["val/pass@4"], "other": ["my/custom"]}


def test_recommended_panels_keep_the_guides_order_and_the_pair():
    panels = sections.panel_list("recommended", ["critic/vpred_mean", "critic/returns/mean", "actor/ppo_kl"])
    assert [title for title, _ in panels] == ["1 · Training progress", "2 · Policy update", "3 · Critic quality",
                                              "4 · Performance"]
    assert panels[1][1] == ["actor/ppo_kl"]
    assert panels[2][1] == [("critic/vpred_mean", "critic/returns/mean")]
    assert sections.panel_list("perf", ["actor/pg_loss"]) == [("System performance", [])]


def test_the_policy_panel_draws_the_entropy_the_log_has():
    """verl V1 logs `actor/entropy` (before the update) and no `actor/entropy_loss`: its panel still has an entropy."""
    assert sections.panel_list("recommended", ["actor/entropy"])[1][1] == ["actor/entropy"]
    assert sections.panel_list("recommended", ["actor/entropy_loss"])[1][1] == ["actor/entropy_loss"]
    both = sections.panel_list("recommended", ["actor/entropy", "actor/entropy_loss"])[1][1]
    assert both == [("actor/entropy_loss", "actor/entropy")]
    assert sections.panel_list("recommended", ["critic/vpred_mean"])[2][1] == ["critic/vpred_mean"]


def _rows(*runs):
    """Runs-table rows: (run dir, seed), all of one config."""
    return pd.DataFrame([{"run": run, "label": f"{run}#{i}", "seed": seed, "task": "cartpole", "scenario": "healthy",
                          "mystery": False, "has_info": True, "overrides": ["task=cartpole", f"trainer.seed={seed}"]}
                         for i, (run, seed) in enumerate(runs)])


def test_seed_groups_hold_distinct_runs_with_distinct_seeds():
    names = sections._group_names(_rows(("a", 1), ("b", 2)))
    assert set(names.values()) == {"healthy ×2 seeds (a#0…)"}
    listed_twice = sections._group_names(_rows(("a", 1), ("a", 1)))
    assert listed_twice == {"a#0": "a#0", "a#1": "a#1"}  # a run is never grouped with itself
    same_seed = sections._group_names(_rows(("a", 1), ("b", 1)))
    assert same_seed == {"a#0": "a#0", "b#1": "b#1"}  # one config trained twice with one seed: no seeds to group


def test_evidence_rows_never_show_a_raw_none():
    table = sections.evidence_table([{"metric": "timing_s/gen", "step": 3, "value": 6.0123456, "range": None,
                                      "status": None},
                                     {"metric": "critic/vf_loss", "step": 0, "value": None, "range": "ok 0 to 10",
                                      "status": "warn"}])
    assert list(table["value"]) == ["6.012", "—"] and list(table["range"]) == ["", "ok 0 to 10"]
    assert list(table["status"]) == ["", "warn"] and "None" not in table.astype(str).to_string()


def test_a_log_without_perf_metrics_shows_its_phase_timings():
    """The guide's §11.4 example 1 logs `timing/gen`, `timing/update_actor`, ... (read as `timing_s/*`) and no
    throughput: the Performance panel draws those phases on one chart rather than nothing."""
    columns = ["timing_s/update_actor", "timing_s/gen", "timing_s/adv", "critic/vf_loss"]
    perf = sections.panel_list("recommended", columns)[3]
    assert perf == ("4 · Performance", [("timing_s/gen", "timing_s/adv", "timing_s/update_actor")])
    assert sections.chart_name(perf[1][0]) == "timing_s/* (gen, adv, update_actor)"
    assert sections.panel_list("recommended", [*columns, "timing_s/step"])[3][1] == ["timing_s/step"]


def test_validation_group_draws_pass_at_k_as_one_chart():
    columns = ["val/score", "val/accuracy", *(f"val/pass@{k}" for k in range(1, 17)),
               "val-core/countdown/reward/mean@16"]
    (_, metrics), = sections.panel_list("val", columns)
    assert metrics == ["val/score", "val/accuracy", "val-core/countdown/reward/mean@16",
                       ("val/pass@1", "val/pass@2", "val/pass@4", "val/pass@8", "val/pass@16")]
    assert sections.panel_list("val", ["val/accuracy", "val/pass@1"])[0][1] == ["val/accuracy", "val/pass@1"]
