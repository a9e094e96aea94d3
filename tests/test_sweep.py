"""A sweep's progress lines and closing table, read from its jobs' run dirs (`playground/sweep.py`); the lines a real
sweep prints are checked in tests/test_batched.py (`test_a_sweep_prints_its_progress_and_ends_with_a_table`)."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

from playground.sweep import PROGRESS_GAP_S, ProgressPrinter, SweepProgress, clock, summary_lines, swept_keys

LR = "actor_rollout_ref.actor.optim.lr"
SCORE = "critic/score/mean"


def write_run(run_dir: Path, status: str | None, last_step: int = 0, start: float | None = None,
              overrides: tuple[str, ...] = (), scores: tuple[float, ...] = (), finding: str | None = None) -> Path:
    """A job's run dir as the launcher and the run write it: `.hydra/overrides.yaml`, run.json (none when `status` is
    None: a job that never started), metrics.jsonl and, once it has ended, findings.json (one warning `finding`, or
    none)."""
    (run_dir / ".hydra").mkdir(parents=True)
    (run_dir / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    if status is not None:
        info = {"status": status, "last_step": last_step, "start_time": time.time() if start is None else start,
                "overrides": list(overrides), "score_metric": SCORE, "family": "gym"}
        (run_dir / "run.json").write_text(json.dumps(info))
    (run_dir / "metrics.jsonl").write_text("".join(
        json.dumps({"training/global_step": step, SCORE: score}) + "\n" for step, score in enumerate(scores, 1)))
    if status not in (None, "running"):
        findings = [{"id": finding, "severity": "warning", "first_step": 1}] if finding else []
        (run_dir / "findings.json").write_text(json.dumps({"findings": findings}))
    return run_dir


def test_progress_counts_steps_of_running_jobs_and_every_step_of_ended_ones(tmp_path):
    since = time.time()
    dirs = [write_run(tmp_path / "0", "running", last_step=30, start=since + 1),
            write_run(tmp_path / "1", "diverged", last_step=3, start=since + 1),  # ended early: nothing left to train
            write_run(tmp_path / "2", "finished", last_step=80, start=since - 60),  # an earlier sweep's, in the dir
            tmp_path / "3"]  # not started
    progress = SweepProgress(dirs, [80] * 4, since)
    assert progress.read() == (110, 1)
    assert progress.line(110, 1, 65) == "sweep  34 % | 110/320 steps | 1/4 runs done | 1:05 elapsed, ~2:04 left"
    assert progress.line(0, 0, 3) == ("sweep   0 % |   0/320 steps | 0/4 runs done | 0:03 elapsed, "
                                      "time left: after the first steps")
    assert progress.line(320, 4, 3725) == "sweep 100 % | 320/320 steps | 4/4 runs done | 1:02:05 in all"


def test_a_line_is_due_every_tenth_of_the_steps_or_after_a_long_wait():
    printer = ProgressPrinter(SweepProgress([Path("a"), Path("b")], [50, 50], 0.0))
    start = printer.shown_at
    assert not printer.due(9, start + 1) and printer.due(10, start + 1)
    printer.shown, printer.shown_at = (10, 0), start + 1
    assert not printer.due(19, start + 2) and printer.due(20, start + 2)
    assert printer.due(11, start + 1 + PROGRESS_GAP_S)  # slow: a line anyway


def test_the_printer_ends_with_a_line_for_the_whole_sweep(tmp_path):
    since = time.time()
    run = write_run(tmp_path / "0", "finished", last_step=4, start=since + 1)
    out = io.StringIO()
    with ProgressPrinter(SweepProgress([run], [4], since), stream=out, poll_s=60):
        pass  # the sweep ended before the first poll: only the last line
    assert out.getvalue().splitlines() == ["sweep 100 % | 4/4 steps | 1/1 runs done | 0:00 in all"]


def test_swept_keys_are_those_whose_values_differ_between_jobs():
    jobs = [["task=cartpole", f"{LR}=0.001", "trainer.seed=1"], ["task=cartpole", f"{LR}=0.002", "trainer.seed=1"],
            ["task=cartpole", f"{LR}=0.002", "trainer.seed=1", "algorithm.gamma=0.9"]]
    assert swept_keys(jobs) == [LR, "algorithm.gamma"]
    assert swept_keys([jobs[0]]) == []


def test_the_summary_names_the_dir_each_jobs_values_verdict_and_score_and_the_explorer_command(tmp_path):
    sweep = tmp_path / "sweep"
    dirs = [write_run(sweep / "0", "finished", 2, overrides=("task=cartpole", f"{LR}=0.001", "trainer.seed=1"),
                      scores=(20.0, 31.25)),
            write_run(sweep / "1", "finished", 2, overrides=("task=cartpole", f"{LR}=0.05", "trainer.seed=1"),
                      scores=(20.0, 412.5), finding="lr_too_high"),
            write_run(sweep / "2", "diverged", 1, overrides=("task=cartpole", f"{LR}=10", "trainer.seed=1"),
                      scores=(float("nan"),), finding="lr_too_high"),
            write_run(sweep / "3", None, overrides=("task=cartpole", f"{LR}=-1", "trainer.seed=1"))]  # a config error
    lines = summary_lines(sweep, dirs, 125)
    assert lines == [f"sweep done: 4 runs in 2:05, in {sweep}", "",
                     f"  job     lr  status    verdict      {SCORE}",
                     "    0  0.001  finished  healthy                  31.25",
                     "    1   0.05  finished  lr_too_high              412.5",
                     "    2     10  diverged  lr_too_high                  —",
                     "    3     -1  unknown   —                            —",
                     "", f"explore: PLAYGROUND_RUNS={sweep} .venv/bin/streamlit run app   (Sweeps page)"]
    assert clock(59.6) == "1:00"
