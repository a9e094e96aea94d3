"""Tests for `app/data.py`: roots, the path check, the run list, tolerant reads, diagnosis, external logs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import psutil
import pytest

from playground.metrics import STEP

import data
import series
from app_helpers import ROOT
from fake_runs import write_run


def test_roots_from_env_or_defaults(tmp_path, monkeypatch):
    monkeypatch.setenv("PLAYGROUND_RUNS", os.pathsep.join([str(tmp_path / "a"), "", str(tmp_path / "b")]))
    assert data.configured_roots() == [tmp_path / "a", tmp_path / "b"]
    monkeypatch.delenv("PLAYGROUND_RUNS")
    monkeypatch.chdir(tmp_path)
    assert data.configured_roots() == [tmp_path / "outputs", tmp_path / "multirun"]
    assert data.allowed_bases()[-1] == tmp_path


def test_inside_refuses_escapes(tmp_path):
    root = tmp_path / "runs"
    (root / "r").mkdir(parents=True)
    (root / "link").symlink_to(tmp_path.parent)
    assert data.inside(root / "r", [root]) == root / "r"
    assert data.inside(f"{root}/r/../../..", [root]) is None
    assert data.inside(root / "link", [root]) is None  # a symlink out of the root
    assert data.inside("/etc/passwd", [root]) is None


def test_list_runs_reads_info_findings_and_warns(tree, tmp_path):
    table, warnings = data.list_runs((str(tmp_path / "outputs"), str(tmp_path / "multirun"), str(tmp_path / "nope")))
    assert len(table) == 8 + 6
    by_run = table.set_index("run")
    assert by_run.loc[str(tree["unstable"]), "findings"][0]["id"] == "lr_too_high"
    assert by_run.loc[str(tree["unstable"]), "worst"] == "warning"
    assert by_run.loc[str(tree["mystery"]), "mystery"]
    assert by_run.loc[str(tree["no_info"]), "status"] == "unknown"
    assert by_run.loc[str(tree["sweep"] / "3"), "sweep"] == str(tree["sweep"])
    assert by_run.loc[str(tree["sweep"] / "3"), "name"] == "multirun/2026-11-30/10-00-00/3"
    assert ("warn_no_run_json", str(tree["no_info"])) in warnings
    assert not any(path == str(tmp_path / "nope") for _, path in warnings)  # not created yet: no warning
    assert data.missing_roots((str(tmp_path / "outputs"), str(tmp_path / "nope"))) == [str(tmp_path / "nope")]


def test_nested_roots_list_each_run_once(tree, tmp_path):
    outputs = tmp_path / "outputs"
    table, _ = data.list_runs((str(outputs / "2026-11-30"), str(outputs), str(outputs)))
    assert len(table) == 8 and table["run"].is_unique
    assert table.set_index("run").loc[str(tree["healthy"]), "name"] == "outputs/2026-11-30/09-00-00"  # outermost


def test_a_run_whose_process_is_gone_says_so(tmp_path):
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(done.stdout)
    me = psutil.Process()
    assert data.run_status({"status": "running", "pid": dead, "start_time": time.time()}) == "gone"
    assert data.run_status({"status": "running", "pid": me.pid, "start_time": time.time()}) == "running"
    # a pid reused by a process that started after the run did is not the run's
    assert data.run_status({"status": "running", "pid": me.pid, "start_time": me.create_time() - 60}) == "gone"
    assert data.run_status({"status": "running"}) == "running"  # no pid recorded (an older run): as it says
    assert data.run_status({"status": "finished", "pid": dead}) == "finished"
    run = write_run(tmp_path / "outputs" / "r", status="running", extra_info={"pid": dead})
    table, _ = data.list_runs((str(tmp_path / "outputs"),))
    assert table.set_index("run").loc[str(run), "status"] == "gone"


def test_list_runs_empty_root(tmp_path):
    (tmp_path / "empty").mkdir()
    table, warnings = data.list_runs((str(tmp_path / "empty"),))
    assert table.empty and warnings == [("warn_root_empty", str(tmp_path / "empty"))]


def test_run_log_skips_half_and_corrupt_lines(tree):
    log = data.run_log(str(tree["running"]))
    assert len(log.records) == 60  # the half-written 61st line is not there yet
    assert log.problems == ["metrics.jsonl line 31: not valid JSON, skipped"]
    with open(tree["running"] / "metrics.jsonl", "a") as f:  # the writer finishes the line
        f.write('_loss": 0.1}\n{"training/global_step": 62}\n')
    assert data.metrics_frame(str(tree["running"]))[STEP].max() == 62


def test_deleted_run_reads_as_empty(tree):
    shutil.rmtree(tree["healthy"])
    assert data.metrics_frame(str(tree["healthy"])).empty
    assert "no such file" in data.run_log(str(tree["healthy"])).problems[0]
    assert data.smoothed_last(str(tree["healthy"]), "critic/score/mean", 0.6, 20) is None
    assert data.samples_frame(str(tree["healthy"]))[0].empty


def test_smoothed_last_from_the_tail_equals_the_full_series(tmp_path):
    run = write_run(tmp_path / "r", steps=500, half_line=True)
    full = series.smooth_ema(data.metrics_frame(str(run))["critic/score/mean"].to_numpy(), 0.9)[-1]
    tail = data.smoothed_last(str(run), "critic/score/mean", 0.9, series.ema_window(0.9))
    assert tail == pytest.approx(full, rel=1e-3)


def test_samples_frame(tree):
    samples, problems = data.samples_frame(str(tree["token"]))
    assert len(samples) == 20 and not problems  # 4 samples at steps 10..50
    assert set(samples.columns) >= {"step", "prompt", "response", "reward", "truncated", "answer"}


def test_run_diagnosis_prefers_findings_json_and_runs_the_engine_live(tree):
    report, status, why = data.run_diagnosis(str(tree["unstable"]))
    assert why is None
    assert [f["id"] for f in report["findings"]] == ["lr_too_high"]  # findings.json, as written at the end
    assert len(status["actor/pg_clipfrac"]) == 60  # the engine's per-step statuses
    live, _, _ = data.run_diagnosis(str(tree["running"]))  # no findings.json yet: the engine on what is there
    assert "findings" in live and live["steps"] == 60


def test_read_log_path_only_under_the_allowed_bases(tree, monkeypatch):
    monkeypatch.chdir(ROOT)
    log, error = data.read_log_path("tests/diagnose/fixtures/guide_11_4_example2.log")
    assert error is None and log.steps == [5] and log.records[0]["actor/pg_clipfrac"] == 0.85
    assert data.read_log_path("/etc/hostname") == (None, "err_outside")
    assert data.read_log_path(str(tree["healthy"] / "nothing.log")) == (None, "err_missing")


def test_read_log_text_console_and_jsonl():
    console = data.read_log_text("step:3 - actor/pg_loss:0.5 - critic/score/mean:0.1\n", "pasted")
    assert console.kind == "verl_console" and console.records[0]["actor/pg_loss"] == 0.5
    lines = "\n".join(json.dumps({STEP: s, "actor/pg_loss": s / 10}) for s in (1, 2)) + "\n{broken\n"
    jsonl = data.read_log_text(lines, "m.jsonl")
    assert jsonl.steps == [1, 2] and jsonl.source == "m.jsonl"
    assert jsonl.problems == ["m.jsonl line 3: not valid JSON, skipped"]
