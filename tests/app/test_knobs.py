"""Tests for `app/knobs.py`'s onset choice: the Lab's "at step N" default, and the onset a run's overrides set."""

from __future__ import annotations

import knobs


def test_at_step_n_starts_at_a_quarter_of_the_run_inside_onset_steps_bounds():
    assert knobs.default_onset(80) == 20 and knobs.default_onset(30) == 7
    assert knobs.default_onset(5) == 2 and knobs.default_onset(2) == 2  # never below 2, never past the run


def test_a_runs_onset_is_read_back_from_its_overrides():
    assert knobs.onset_from(["task=cartpole", "scenario=lr_too_high", "onset_step=20"]) == 20
    assert knobs.onset_from(["task=cartpole", "onset_step=null"]) is None
    assert knobs.onset_from(["task=cartpole"]) is None
    assert knobs.overrides_for("cartpole", "lr_too_high", {}, onset=20) == [
        "task=cartpole", "scenario=lr_too_high", "onset_step=20"]
    assert knobs.onset_of("cartpole", "lr_too_high").allowed and not knobs.onset_of("cartpole", "healthy").allowed
