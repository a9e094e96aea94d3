"""Tests for app/lab_run.py's status line: what the Lab says of its run above the panels."""

from __future__ import annotations

import json
import os
import time

import lab_run
from app_helpers import fixes


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


# a finding as the engine writes it for reverse's reward_variance_too_large (diagnose/injected.py): the knob that broke
# the run apart from the fix, and the fix as a verl user pulls it
NOISY = {"id": "reward_variance_too_large", "severity": "warning", "first_step": 5, "last_step": 12, "evidence": [],
         "explanation": {"en": "noisy.", "zh": "噪声。"}, "fix": "reward.clip=1.0", "rule": "reward_variance_too_large",
         "injected": [{"key": "reward.noise_std", "value": 3.0, "remedy": {},
                       "verl": {"en": "a noisy reward function", "zh": "有噪声的奖励函数"}}],
         "levers": [{"key": "reward.clip", "verl": {"en": "clip in your reward function", "zh": "在奖励函数里裁剪"}}]}
CRASH = {**NOISY, "id": "training_crash", "severity": "critical", "fix": "reward.nan_rate=0.0", "levers": [],
         "injected": [{"key": "reward.nan_rate", "value": 0.01, "verl": {"en": "NaN rewards", "zh": "NaN 奖励"},
                       "remedy": {"en": "guard your reward function", "zh": "保护奖励函数"}}]}


def _cards(findings, lang):
    from streamlit.testing.v1 import AppTest

    def body(report, lang):
        import streamlit as st

        import lab_run

        st.session_state["lang"] = lang
        lab_run.draw_findings("run", report, "lab_run", False)

    return AppTest.from_function(body, args=({"findings": findings}, lang), default_timeout=60).run()


def test_the_fix_card_says_what_broke_the_run_apart_from_the_lever():
    from app_helpers import texts

    at = _cards([NOISY], "en")
    assert not at.exception
    page = texts(at)
    assert "What broke this run: `reward.noise_std=3.0` (in a verl run: a noisy reward function)" in page
    assert "In verl: `reward.clip`: clip in your reward function" in page
    assert fixes(at) == ["reward.clip=1.0"]
    assert at.button(key="lab_run-reward_variance_too_large-apply")
    assert "In your code" not in page  # the fix is a lever, not the cause removed
    zh = texts(_cards([NOISY], "zh"))
    assert "本次运行的故障来源：`reward.noise_std=3.0`（在 verl 运行中：有噪声的奖励函数）" in zh
    assert "在 verl 中：`reward.clip`：在奖励函数里裁剪" in zh


def test_a_broken_reward_functions_card_says_what_to_change_in_the_users_code():
    from app_helpers import texts

    at = _cards([CRASH], "en")
    assert "What broke this run: `reward.nan_rate=0.01` (in a verl run: NaN rewards)" in texts(at)
    assert "In your code: guard your reward function" in texts(at)
    assert fixes(at) == ["reward.nan_rate=0.0"]  # Apply and rerun still runs the cured config
    assert "在你的代码中：保护奖励函数" in texts(_cards([CRASH], "zh"))


def test_the_status_line_of_a_run_its_user_stopped_says_so(tmp_path):
    run = tmp_path / "cartpole-stopped"
    run.mkdir()
    info = {"status": "interrupted", "last_step": 12, "total_steps": 60,
            "error": "stopped by you (Ctrl-C, or Stop in the explorer)"}
    (run / "run.json").write_text(json.dumps(info))
    assert lab_run.status_line(str(run)) == "**cartpole-stopped** · ■ stopped by you · step 12/60"
    (run / "run.json").write_text(json.dumps({**info, "error": "terminated by signal SIGTERM"}))
    assert lab_run.status_line(str(run)) == "**cartpole-stopped** · ■ interrupted · step 12/60"


def test_the_cause_is_compared_with_the_doctors_onset_only_for_a_run_whose_cause_arrived_mid_run():
    report = {"last_good": {"onset_step": 24, "finding": "lr_too_high", "step": 23}}
    assert lab_run.cause_vs_onset({"onset_step": 20}, report) == {"step": 20, "onset": 24, "finding": "lr_too_high",
                                                                  "lag": 4}
    early = {"last_good": {"onset_step": 12, "finding": "value_drift", "step": 11}}
    assert lab_run.cause_vs_onset({"onset_step": 20}, early)["lag"] == -8  # a problem of the healthy part
    assert lab_run.cause_vs_onset({"onset_step": 20}, {"findings": []}) == {"step": 20, "onset": None,
                                                                            "finding": None, "lag": None}
    assert lab_run.cause_vs_onset({"onset_step": None}, report) is None
    assert lab_run.cause_vs_onset({}, report) is None
