"""Tests for `python -m playground.diagnose` (main() called in-process): report, --json, --text, exit codes."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from playground.diagnose.__main__ import main
from playground.metrics import STEP
from playground.rundir.runs import read_findings

FIXTURES = Path(__file__).parent / "fixtures"
EXAMPLE2 = "step:5 - actor/pg_loss:0.523 - actor/pg_clipfrac:0.850 - actor/ppo_kl:0.125 - actor/grad_norm:1.000"


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _write_run(run_dir: Path, clipfrac: float, kl: float, score_slope: float) -> None:
    """A tiny gym run: 10 steps, the score 10 + slope x step of a 475 target."""
    run_dir.mkdir(parents=True)
    lines = [json.dumps({STEP: s, "actor/pg_clipfrac": clipfrac, "actor/ppo_kl": kl, "actor/grad_norm": 0.3,
                         "actor/entropy_loss": 0.6, "critic/score/mean": 10.0 + score_slope * s}) for s in range(1, 11)]
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    (run_dir / "run.json").write_text(json.dumps({
        "status": "finished", "task": "cartpole", "family": "gym", "scenario": "healthy", "seed": 0,
        "score_target": 475.0, "max_entropy": math.log(2), "action_space": "discrete", "total_steps": 10,
        "mystery": False, "grad_clip_actor": 0.5}))


def test_human_report_on_a_fixture(capsys):
    code, out, _ = _cli(capsys, FIXTURES / "guide_11_4_example2.log")
    assert code == 0
    assert "status: 1 warning (worst: warning)" in out
    assert "[warning] root cause: lr_too_high: learning rate too high, step 5, since step 5 (rule lr_too_high)" in out
    assert "actor/pg_clipfrac = 0.85 (at step 5)" in out
    assert "fix: actor_rollout_ref.actor.optim.lr=<current/10>" in out
    assert re.search(r"too little data: \d+ rules need more than the 1 step logged \(.*5 for [^;]*grad_clip_saturation",
                     out)
    assert "(family llm, 1 step)" in out  # not "1 steps"


def test_chinese_report(capsys):
    code, out, _ = _cli(capsys, FIXTURES / "guide_11_4_example3.log", "--lang", "zh")
    assert code == 0 and "[警告] 根因: critic_undertrained: Critic 学习不足, 第 50 步" in out and "修复:" in out


def test_json_is_one_document(capsys):
    code, out, _ = _cli(capsys, FIXTURES / "guide_11_4_example1.log", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["version"] == 1 and len(doc["results"]) == 1
    result = doc["results"][0]
    assert result["worst_severity"] == "info" and [f["id"] for f in result["findings"]] == ["inconclusive"]
    assert [d["root"]["id"] for d in result["diagnoses"]] == ["inconclusive"]
    assert result["steps"] == 1 and result["family"] == "llm"


def test_multirun_dir_diagnoses_every_run_and_writes_findings(tmp_path, capsys):
    _write_run(tmp_path / "multirun" / "0", clipfrac=0.01, kl=0.001, score_slope=11.0)
    _write_run(tmp_path / "multirun" / "1", clipfrac=0.6, kl=0.2, score_slope=0.0)
    code, out, _ = _cli(capsys, tmp_path / "multirun", "--json")
    results = json.loads(out)["results"]
    assert code == 0 and [Path(r["source"]).name for r in results] == ["0", "1"]
    assert [f["id"] for f in results[0]["findings"]] == ["healthy"]
    assert "lr_too_high" in [f["id"] for f in results[1]["findings"]]
    assert read_findings(tmp_path / "multirun" / "1")["worst_severity"] == "warning"
    assert read_findings(tmp_path / "multirun" / "0")["worst_severity"] == "info"
    code, out, _ = _cli(capsys, tmp_path / "multirun")
    assert out.count("== ") == 2 and "(family gym, 10 steps)" in out


def test_pasted_line_and_one_line_file(tmp_path, capsys):
    code, out, _ = _cli(capsys, "--text", EXAMPLE2)
    assert code == 0 and "lr_too_high" in out and "too little data" in out
    one_line = tmp_path / "line.txt"
    one_line.write_text(EXAMPLE2 + "\n")
    code, out, _ = _cli(capsys, one_line, "--json")
    assert code == 0 and json.loads(out)["results"][0]["findings"][0]["id"] == "lr_too_high"


def test_family_override(capsys):
    code, out, _ = _cli(capsys, "--text", "step:3 - actor/pg_clipfrac:0.08 - actor/ppo_kl:0.1", "--family", "token")
    assert code == 0 and "lr_too_high" in out and "token calibration" in out


@pytest.mark.parametrize("argv", [["/no/such/path"], ["--text", "not a metrics line"]])
def test_unreadable_input_exits_2(capsys, argv):
    code, _, err = _cli(capsys, *argv)
    assert code == 2 and "error:" in err


def test_a_log_that_is_only_a_traceback_is_a_crash_with_its_exception_as_evidence(capsys):
    """No step line at all, an exception: the run died before its first step (issue 38)."""
    code, out, _ = _cli(capsys, FIXTURES / "junk.log")
    assert code == 0 and "root cause: training_crash" in out
    assert "ModuleNotFoundError: No module named 'verl'" in out


def test_the_report_puts_the_root_first_its_consequences_under_it_and_says_what_was_ruled_out(capsys, tmp_path):
    """A too-high lr whose gradients sit at the clip: one diagnosis, lr_too_high its root."""
    run_dir = tmp_path / "run"
    _write_run(run_dir, clipfrac=0.4, kl=0.2, score_slope=0.0)
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    for line in lines:
        line["actor/grad_norm"] = 0.9  # past the run's grad_clip 0.5 every step
        line["critic/rewards/mean"], line["critic/rewards/std"] = 1.0, 0.5
        line["critic/rewards/max"], line["critic/rewards/min"] = 2.0, 0.0
    (run_dir / "metrics.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    code, out, _ = _cli(capsys, run_dir)
    assert code == 0
    root = out.index("[warning] root cause: lr_too_high")
    consequence = out.index("    [warning] grad_clip_saturation: gradient clipping saturated")
    assert root < consequence and "a consequence of lr_too_high" in out[consequence:]
    assert "checked and ruled out: reward signal (critic/rewards/*)" in out
    document = json.loads((run_dir / "findings.json").read_text())
    assert [(d["root"]["id"], [c["id"] for c in d["consequences"]]) for d in document["diagnoses"]] == [
        ("lr_too_high", ["grad_clip_saturation"])]


def test_loss_updates_flag_judges_summed_losses_per_update(capsys, tmp_path):
    log = tmp_path / "v07.log"
    log.write_text("".join(f"step:{s} - actor/pg_loss:{0.4 * (-1) ** s} - critic/score/mean:0.1\n"
                           for s in range(1, 13)))
    assert "unstable_policy_loss" in _cli(capsys, log)[1]  # read as means: swings of 0.8 a step
    _, out, _ = _cli(capsys, log, "--loss-updates", "32")  # 32 updates summed: 0.025 a step per update
    assert "unstable_policy_loss: " not in out and "losses read as sums over 32 updates" in out


def test_the_guides_example1_pasted_as_text_is_inconclusive_and_names_what_is_out_of_range(capsys):
    """§11.4 example 1, pasted as the guide prints it: one step of a fresh PPO run is no evidence of health; the
    critic's high loss and gradient are listed with the guide's reading, and its `timing/*` keys are read."""
    text = (FIXTURES / "guide_11_4_example1.log").read_text(encoding="utf-8")
    code, out, _ = _cli(capsys, "--text", text)
    assert code == 0 and "status: inconclusive" in out and "healthy" not in out.split("notes:")[0]
    assert "critic/vf_loss = 14.95 (at step 0): high: normal only early in training [warn]" in out
    assert "critic/grad_norm = 1023 (at step 0): very large: normal only at the start [warn]" in out
    code, out, _ = _cli(capsys, "--text", text, "--json")
    records = json.loads(out)["results"][0]
    assert records["steps"] == 1 and [f["id"] for f in records["findings"]] == ["inconclusive"]


def test_the_guides_example1_timing_keys_are_read_as_verls_timing_s():
    from playground.diagnose.readers import parse_verl_text

    read = parse_verl_text((FIXTURES / "guide_11_4_example1.log").read_text(encoding="utf-8"))
    (record,) = read.records
    assert {"timing_s/gen", "timing_s/update_actor", "timing_s/update_critic"} <= set(record)
    assert record["critic/lr"] == pytest.approx(1e-5) and record["actor/lr"] == pytest.approx(1e-8)  # lr(1e-4) x 0.1


# ---- a tool a verl user keeps running (issue 38): --fail-on, --format markdown, --follow --------------------------
REAL = FIXTURES / "real"


@pytest.mark.parametrize("fail_on,code", [(None, 0), ("warning", 1), ("critical", 0)])
def test_fail_on_sets_the_exit_code_on_a_log_with_a_warning(capsys, fail_on, code):
    argv = [REAL / "qwen3_8b_grpo_dapo17k_verl07_megatron_truncation.log"]  # response_truncation: a warning
    assert _cli(capsys, *argv, *(["--fail-on", fail_on] if fail_on else []))[0] == code


def test_fail_on_critical_fails_a_crash_and_passes_a_healthy_run(capsys):
    assert _cli(capsys, REAL / "userrl_issue4_flashattn_importerror.log", "--fail-on", "critical")[0] == 1
    assert _cli(capsys, REAL / "gemma2b_ppo_gsm8k_verldata.log", "--fail-on", "warning")[0] == 0


def test_markdown_report_has_a_table_of_roots_and_their_fixes(capsys):
    code, out, _ = _cli(capsys, REAL / "qwen3_8b_grpo_dapo17k_verl07_megatron_truncation.log", "--format", "markdown")
    assert code == 0 and out.startswith("## ")
    assert "| root cause | severity | steps | since step | fix |" in out and "| **response_truncation**" in out
    assert "`data.max_response_length=" in out
    code, out, _ = _cli(capsys, REAL / "qwen3_8b_grpo_dapo17k_verl07_megatron_truncation.log", "--format", "markdown",
                        "--lang", "zh")
    assert "| 根因 | 严重程度 | 步 | 起始步 | 修复 |" in out


def _grow(path, lines, pause):
    """Append lines to a log one at a time, as a running trainer prints them."""
    import time

    for line in lines:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
        time.sleep(pause)


def test_follow_says_each_finding_once_as_the_log_grows(tmp_path):
    """A console log written while --follow reads it: the truncation appears half-way and is said once, with its step
    and fix; the watch ends once the file is still, with the report and the exit code --fail-on asks for."""
    import threading

    log = tmp_path / "train.log"
    healthy = [f"step:{s} - actor/pg_loss:0.01 - critic/score/mean:{0.1 + 0.02 * s:.3f} - "
               f"response_length/clip_ratio:0.01 - response_length/mean:300" for s in range(1, 8)]
    cut = [f"step:{s} - actor/pg_loss:0.01 - critic/score/mean:0.2 - response_length/clip_ratio:0.85 - "
           f"response_length/mean:1020" for s in range(8, 16)]
    writer = threading.Thread(target=_grow, args=(log, healthy + cut, 0.03))
    said: list[str] = []
    writer.start()
    from playground.diagnose.follow import follow

    report = follow(log, interval=0.05, idle_exit=1.0, echo=said.append)
    writer.join()
    lines = [line for line in said if line.startswith("[step")]
    assert [line.split()[3] for line in lines].count("response_truncation:") == 1, said
    (line,) = [line for line in lines if "response_truncation" in line]
    assert "fix: data.max_response_length=" in line and int(line.split()[1].rstrip("]")) >= 8
    assert report is not None and report.steps == 15 and "response_truncation" in report.roots()


def test_follow_on_the_command_line_waits_for_the_file_and_fails_on_a_crash(tmp_path, capsys):
    import threading

    log = tmp_path / "later.log"
    lines = ["step:1 - actor/pg_loss:0.01 - critic/score/mean:0.1", "Traceback (most recent call last):",
             '  File "main_ppo.py", line 5, in <module>', "ValueError: reduce_metrics got an empty list"]
    writer = threading.Timer(0.2, _grow, args=(log, lines, 0.02))
    writer.start()
    code = main([str(log), "--follow", "--interval", "0.05", "--idle-exit", "1", "--fail-on", "critical"])
    writer.join()
    out = capsys.readouterr().out
    assert code == 1 and "waiting for" in out and "critical training_crash" in out
    assert "ValueError: reduce_metrics got an empty list" in out
    assert "root cause: training_crash" in out  # the report, printed when the watch ends
