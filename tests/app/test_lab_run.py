"""Tests for app/lab_run.py's status line: what the Lab says of its run above the panels."""

from __future__ import annotations

import json
import os
import time

import lab_run


def test_the_status_line_of_a_run_building_its_base_says_how_far_the_base_is(tmp_path):
    run = tmp_path / "countdown-big"
    run.mkdir()
    info = {"status": "running", "pid": os.getpid(), "start_time": time.time(), "last_step": 0, "total_steps": 60}
    (run / "run.json").write_text(json.dumps({**info, "phase": "sft_base",
                                              "base": {"step": 40, "total": 4000, "eta_s": 3000.0}}))
    assert lab_run.status_line(str(run)) == ("**countdown-big** · ▶ running · building its SFT base: 1% (~50 min left; "
                                             "once, later runs load it)")
    (run / "run.json").write_text(json.dumps({**info, "last_step": 3}))  # the trainer's own run.json replaces it
    assert lab_run.status_line(str(run)) == "**countdown-big** · ▶ running · step 3/60"


def test_a_base_that_stops_at_its_target_gives_its_cap_not_a_share(tmp_path):
    run = tmp_path / "reverse-wide"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({
        "status": "running", "pid": os.getpid(), "start_time": time.time(), "last_step": 0, "total_steps": 60,
        "phase": "sft_base", "base": {"step": 256, "total": 3000, "eta_s": 540.0, "target": 0.3}}))
    assert lab_run.status_line(str(run)) == ("**reverse-wide** · ▶ running · building its SFT base: step 256 of at "
                                             "most 3000 (at most ~9 min left; once, later runs load it)")
