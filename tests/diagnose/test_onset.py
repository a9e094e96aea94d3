"""Onsets and the last good step (`playground.diagnose.onset`): each finding's onset, the step before the run's first
problem, the last verl checkpoint at or before it, and how the text, JSON, Markdown and --follow forms say them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from playground.diagnose import onset
from playground.diagnose.__main__ import main
from playground.diagnose.engine import diagnose
from playground.diagnose.finding import Finding
from playground.diagnose.report import format_diagnosis, format_markdown
from playground.diagnose.run_summary import summary_lines
from playground.diagnose.sources import diagnose_run_dir
from playground.metrics import to_json_value
from playground.rundir.runs import read_findings
from tests.diagnose.test_engine import FLAT, run

CRASH_AT = {"actor/grad_norm": lambda s: 0.5 if s < 26 else math.nan}  # healthy to step 25, NaN from step 26


def _write_run(run_dir: Path, records: list[dict[str, float]], saves: tuple[int, ...] = ()) -> Path:
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.jsonl").write_text(
        "".join(json.dumps({k: to_json_value(v) for k, v in r.items()}) + "\n" for r in records))
    (run_dir / "run.json").write_text(json.dumps({"status": "finished", "family": "llm"}))
    for step in saves:
        (run_dir / f"global_step_{step}").mkdir()
    return run_dir


def test_a_run_healthy_then_crashing_at_a_step_has_its_onset_there_and_the_step_before_as_last_good():
    report = diagnose(run(30, **CRASH_AT))
    crash = next(f for f in report.findings if f.id == "training_crash")
    assert crash.onset_step == 26 and crash.to_dict()["onset_step"] == 26
    assert report.last_good is not None
    assert (report.last_good.onset_step, report.last_good.finding, report.last_good.step) == (26, "training_crash", 25)


def test_a_window_rule_dates_its_onset_to_where_its_metric_turned_within_the_first_window_that_showed_it():
    # large policy steps from step 20 on a stalled score: lr_too_high's window (3 of 5 steps) first holds on 18-22;
    # within it pg_clipfrac's level changes at 20 (against the 5 steps before the window)
    report = diagnose(run(40, **FLAT, **{"actor/pg_clipfrac": lambda s: 0.15 if s < 20 else 0.6,
                                         "actor/ppo_kl": lambda s: 0.003 if s < 20 else 0.08}))
    high = next(f for f in report.findings if f.id == "lr_too_high")
    assert (high.first_step, high.since_step, high.onset_step) == (22, 18, 20)
    assert high.under_way_from == 18  # what appeared from the window's start on is still its consequence
    assert report.last_good is not None and report.last_good.step == report.last_good.onset_step - 1
    assert report.last_good.onset_step <= high.onset_step


def test_a_trend_rule_dates_its_onset_to_where_the_fall_began_not_to_its_window_start():
    # entropy flat at 0.6 until step 30, then falling to 0 in three steps while the score stalls
    falling = {"actor/entropy_loss": lambda s: 0.6 if s < 30 else max(0.0, 0.6 - 0.25 * (s - 29))}
    report = diagnose(run(60, **FLAT, **falling))
    found = [f for f in report.findings
             if f.severity != "info" and f.id in ("entropy_collapse", "overly_deterministic")]
    assert found, [f.id for f in report.findings]
    for finding in found:
        assert 30 <= finding.onset_step <= 32, (finding.id, finding.since_step, finding.onset_step)


def test_the_last_good_step_is_the_last_logged_step_before_the_onset():
    found = [Finding(id="lr_too_high", severity="warning", first_step=50, last_step=60, since_step=40),
             Finding(id="healthy", severity="info", first_step=1, last_step=60)]
    good = onset.last_good(found, [10, 20, 30, 40, 50, 60])
    assert good is not None and (good.onset_step, good.step) == (40, 30)


def test_the_last_checkpoint_at_or_before_the_last_good_step_is_named(tmp_path):
    run_dir = _write_run(tmp_path / "run", run(30, **CRASH_AT), saves=(10, 20, 30))
    report = diagnose_run_dir(run_dir)
    assert report.last_good is not None and report.last_good.step == 25
    assert report.last_good.checkpoint == "global_step_20"
    assert report.last_good.checkpoint_path == str(run_dir / "global_step_20")
    written = read_findings(run_dir)
    assert written is not None and written["last_good"]["step"] == 25
    assert written["last_good"]["checkpoint"] == "global_step_20"
    assert {f["id"]: f["onset_step"] for f in written["findings"]}["training_crash"] == 26
    assert "last good step: 25 (checkpoint: global_step_20)" in format_diagnosis(str(run_dir), report).splitlines()
    assert "**last good step: 25 (checkpoint: global_step_20)**" in format_markdown(str(run_dir), report)
    lines = summary_lines(run_dir)  # what the run says in the terminal as it ends, read back from findings.json
    (at,) = [i for i, line in enumerate(lines) if line.startswith("diagnosis: training_crash")]
    assert lines[at + 1] == "last good step: 25 (checkpoint: global_step_20)"


def test_checkpoints_in_verls_default_local_dir_beside_a_console_log_are_found(tmp_path, capsys):
    log = tmp_path / "train.log"
    log.write_text("".join(f"step:{s} - actor/grad_norm:{'nan' if s >= 26 else 0.5} - critic/score/mean:0.5\n"
                           for s in range(1, 31)))
    for step in (10, 20, 30):  # trainer.default_local_dir's default: checkpoints/<project>/<experiment>
        (tmp_path / "checkpoints" / "proj" / "exp" / f"global_step_{step}").mkdir(parents=True)
    (tmp_path / "checkpoints" / "proj" / "exp" / "global_step_x").mkdir()  # not a save: no step in its name
    assert main([str(log), "--json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert result["last_good"]["step"] == 25 and result["last_good"]["checkpoint"] == "global_step_20"
    assert main([str(log)]) == 0
    out = capsys.readouterr().out
    assert "last good step: 25 (checkpoint: global_step_20)" in out and "since step 26" in out


def test_a_run_without_a_warning_has_no_last_good_step(tmp_path):
    report = diagnose_run_dir(_write_run(tmp_path / "run", run(30), saves=(10,)))
    assert all(f.severity == "info" for f in report.findings) and report.last_good is None
    text = format_diagnosis("run", report)
    assert "last good step" not in text and "last good step" not in format_markdown("run", report)
    assert not any(line.startswith("last good step") for line in summary_lines(tmp_path / "run"))
    assert (read_findings(tmp_path / "run") or {})["last_good"] is None


@pytest.mark.parametrize("lang, said", [("en", "last good step: no good step (a problem from step 1)"),
                                        ("zh", "最后正常的一步：无（从第 1 步起就有问题）")])
def test_a_warning_from_the_first_step_leaves_no_good_step(lang, said):
    report = diagnose(run(30, **{"actor/grad_norm": math.nan}))
    assert report.last_good is not None and report.last_good.step is None and report.last_good.checkpoint is None
    assert said in format_diagnosis("run", report, lang).splitlines()


def test_follow_says_each_findings_onset_and_the_last_good_step(tmp_path):
    from playground.diagnose.follow import follow

    log = tmp_path / "train.log"
    log.write_text("".join(f"step:{s} - actor/grad_norm:{'nan' if s >= 26 else 0.5} - critic/score/mean:0.5\n"
                           for s in range(1, 31)))
    (tmp_path / "global_step_20").mkdir()
    said: list[str] = []
    follow(log, interval=0.01, idle_exit=0.0, echo=said.append)
    (crash,) = [line for line in said if "training_crash" in line and not line.startswith("== ")]  # not a headline
    assert "| since step 26" in crash
    assert said.count("last good step: 25 (checkpoint: global_step_20)") == 1


def test_an_older_findings_json_gives_the_onset_from_its_steps():
    assert onset.onset_step({"id": "a", "first_step": 9, "since_step": 5}) == 5
    assert onset.onset_step({"id": "a", "first_step": 9, "since_step": None}) == 9
    with pytest.raises(ValueError, match="no step"):
        onset.onset_step({"id": "a"})
