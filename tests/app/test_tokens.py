"""Tests for `app/tokens.py`: a token record's per-token values, the order a finding asks for, the colours."""

from __future__ import annotations

import math

import pytest
import tokens


def _record(row=0, adv=(0.5, -0.5, 0.2), clipped=(1, 0, 0), dual=(0, 0, 0), log_ratio=(0.3, -0.3, 0.0),
            rewards=(1.0, 0.0), reward=1.0, mask=(1, 1, 0)):
    return {"step": 1, "row": row, "uid": 0, "tokens": ["a", "b", "<eos>"], "mask": list(mask), "reward": reward,
            "group": {"rows": [0, 1], "rewards": list(rewards)}, "advantages": list(adv),
            "old_log_prob": [-1.0, -2.0, -0.5], "ref_log_prob": [-1.5, -2.0, -0.5],
            "rollout_log_prob": [-1.0, -1.0, -0.5], "entropy": [0.1, 2.0, 0.3],
            "updates": [{"micro": 0, "log_ratio": list(log_ratio), "clipped": list(clipped),
                         "clipped_lower": list(dual)}]}


def test_token_values_read_every_quantity():
    values = tokens.token_values(_record(clipped=(1, 1, 0), dual=(0, 0, 1)))
    assert list(values["clipped"]) == ["upper", "lower", "dual"]  # A > 0 past 1 + ε, A < 0 below 1 − ε, dual clip
    assert math.isclose(values["ratio"][0], math.exp(0.3))
    assert list(values["kl"]) == [0.5, 0.0, 0.0]  # log π_old − log π_ref
    assert math.isclose(values["mismatch"][1], math.exp(-1.0) - math.exp(-2.0))  # rollout − trainer probability


def test_step_tokens_keep_the_trained_tokens_only():
    every = tokens.step_tokens(tokens.responses([_record(), _record(row=1)]))
    assert len(every) == 4 and set(every["row"]) == {0, 1}  # the masked <eos> of each left out


def test_ordered_puts_what_a_focus_is_about_first():
    calm = _record(row=0, clipped=(0, 0, 0), adv=(0.1, 0.1, 0.1))
    clipped = _record(row=1, clipped=(1, 1, 0))
    alike = _record(row=2, rewards=(1.0, 1.0), clipped=(0, 0, 0), adv=(0.0, 0.0, 0.0))
    shown = tokens.responses([calm, clipped, alike])
    assert [r.record["row"] for r in tokens.ordered(shown, "clipped")] == [1, 0, 2]
    assert [r.record["row"] for r in tokens.ordered(shown, "zero_adv")][0] == 2
    assert tokens.group_alike(alike) and not tokens.group_alike(calm)


def test_group_summary_describes_the_groups_rewards():
    """The group as the page describes it (the estimators' own statistics and formulas: test_advantage_notes.py)."""
    summary = tokens.group_summary(_record(rewards=(1.0, 0.0), reward=1.0))
    assert summary == {"mean": 0.5, "std": pytest.approx(math.sqrt(0.5))}
    assert tokens.group_summary(_record(rewards=(0.7,), reward=0.7)) == {"mean": 0.7, "std": 0.0}


def test_colours_and_the_html_mark_the_environments_tokens():
    assert tokens.colour("upper", "clipped", 1.0).startswith("rgba(214,39,40")
    assert tokens.colour(2.0, "ratio", 1.0).startswith("rgba(31,119,180")  # ratio above 1: blue
    assert tokens.colour(None, "kl", 1.0) == "transparent"
    (response,) = tokens.responses([_record()])
    html = tokens.response_html(response, "advantage", tokens.scale_of(tokens.step_tokens([response]), "advantage"))
    assert html.count("<span") == 3 and "&lt;eos&gt;" in html and "dotted" in html  # the masked token greyed


def test_each_findings_focus_is_a_finding_and_a_focus():
    from playground.failures import FAILURE_IDS
    from playground.rundir.runs import TOKEN_FOCI

    assert set(tokens.FINDING_FOCUS) <= set(FAILURE_IDS)
    assert set(tokens.FINDING_FOCUS.values()) <= set(TOKEN_FOCI)
