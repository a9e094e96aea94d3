"""`make play`'s demo: the runs it trains, and how it stops."""

import os
import signal
import subprocess
import sys
import time

import pytest

from playground import demo
from playground.demo import demo_commands, explorer_roots, run_dir_of, stopped_line, to_train
from playground.rundir.runs import RunRecorder, read_run_info

from .conftest import ROOT


def test_demo_commands_write_each_run_into_its_own_dir(tmp_path):
    commands = demo_commands(tmp_path)
    run_dirs = [c[-1].removeprefix("hydra.run.dir=") for c in commands]
    assert len(commands) >= 5 and len(set(run_dirs)) == len(run_dirs)
    assert all(d.startswith(str(tmp_path)) for d in run_dirs)


def test_sigterm_stops_the_demo_and_the_run_it_is_training(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "playground.demo", "--no-explorer", "--runs", str(tmp_path)],
                            cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = tmp_path / demo_commands(tmp_path)[0][-1].rsplit("/", 1)[1]
    deadline = time.time() + 60
    while time.time() < deadline and not ((first / "metrics.jsonl").exists()
                                          and (first / "metrics.jsonl").stat().st_size > 0):
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err  # a stop asked for is no failure: `make play` prints no "Error 143"
    assert stopped_line(tmp_path) in out and "Traceback" not in err
    info = read_run_info(first)
    assert info["status"] == "interrupted" and "SIGTERM" in info["error"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [first.name]  # no later run was started


def test_ctrl_c_ends_the_demo_with_code_0_and_how_to_go_on(tmp_path):
    """Ctrl-C reaches the terminal's whole foreground group (make, the demo, the run it trains): the demo ends with 0
    (make then prints no "Error 130"), no traceback, and says how to go on. Sent as the demo starts its first run."""
    proc = subprocess.Popen([sys.executable, "-m", "playground.demo", "--no-explorer", "--runs", str(tmp_path)],
                            cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("training the demo runs into")  # its handlers are in place
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert stopped_line(tmp_path) in out and "make play" in out and "Traceback" not in err


def test_a_stopped_demo_goes_on_where_it_stopped(tmp_path):
    """A later `make play` keeps the runs that ended and trains the rest; the one it stopped starts over in a clean
    folder (a run dir's metrics are appended to: a second run into it would mix two runs)."""
    first, second, third = (run_dir_of(c) for c in demo_commands(tmp_path)[:3])
    for run_dir, status in ((first, "finished"), (second, "interrupted")):
        recorder = RunRecorder(run_dir, {})
        recorder.log({"training/global_step": 1})
        recorder.finish(status)
    assert [run_dir_of(c) for c in to_train(tmp_path)][:2] == [second, third]
    assert (first / "metrics.jsonl").is_file() and not second.exists()


def test_the_explorer_lists_the_demo_runs_once(tmp_path):
    roots = explorer_roots(ROOT / "outputs" / "demo").split(os.pathsep)
    assert roots == [str(ROOT / "outputs"), str(ROOT / "multirun")]  # outputs/demo lies inside outputs/
    assert explorer_roots(tmp_path).split(os.pathsep)[-1] == str(tmp_path)


class _StartingRun:
    """A run's process whose start is where the Ctrl-C lands (the signal handler runs inside Popen)."""

    made: list["_StartingRun"] = []
    stops: demo.StopRequests

    def __init__(self, command, **kwargs):
        _StartingRun.stops.handler(signal.SIGINT, None)
        self.stopped = False
        _StartingRun.made.append(self)

    def poll(self):
        return 0 if self.stopped else None

    def wait(self, timeout=None):
        return 0

    def terminate(self):
        self.stopped = True


def test_a_ctrl_c_while_a_run_starts_stops_that_run_too(tmp_path, monkeypatch):
    """Raised inside Popen, after its fork, the interrupt would leave a child no one stops (forked after the
    terminal's signal, it never got it); it is raised once Popen has returned, and the child is stopped."""
    stops = _StartingRun.stops = demo.StopRequests()
    monkeypatch.setattr(demo.subprocess, "Popen", _StartingRun)
    _StartingRun.made.clear()
    with pytest.raises(KeyboardInterrupt):
        demo.run_demo_sweep(tmp_path, stops)
    assert len(_StartingRun.made) == 1 and _StartingRun.made[0].stopped


def test_a_stop_swallowed_on_its_way_up_still_stops_the_next_run(tmp_path, monkeypatch):
    stops = _StartingRun.stops = demo.StopRequests()
    stops.asked.append(signal.SIGTERM)  # asked, but its KeyboardInterrupt got lost
    monkeypatch.setattr(demo.subprocess, "Popen", _StartingRun)
    _StartingRun.made.clear()
    with pytest.raises(KeyboardInterrupt):
        demo.run_demo_sweep(tmp_path, stops)
    assert _StartingRun.made == []  # no run was started


def test_without_a_terminal_the_demo_prints_its_lines_and_progress_as_it_goes(tmp_path):
    """Into a pipe (a log, `make play > log`) each line arrives as printed, not at exit, and the demo says which run
    trains and how far it has come: read here while the demo still runs."""
    proc = subprocess.Popen([sys.executable, "-m", "playground.demo", "--no-explorer", "--runs", str(tmp_path),
                             "--progress-every", "0.5"],
                            cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    total = len(demo_commands(tmp_path))
    first = run_dir_of(demo_commands(tmp_path)[0]).name
    try:
        lines = [proc.stdout.readline() for _ in range(2)]
        assert lines[0].startswith("training the demo runs into")
        assert lines[1] == f"demo run 1/{total} {first}: started\n"
        while not (line := proc.stdout.readline()).startswith(f"demo run 1/{total} {first}: step "):
            assert line, "the demo ended without a progress line"
        done, _, steps = line.removeprefix(f"demo run 1/{total} {first}: step ").strip().partition(" of ")
        assert int(done) >= 0 and int(steps) > 0
        assert proc.poll() is None  # the lines came while it ran
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert stopped_line(tmp_path) in out and "no demo run had ended yet" in out
    assert f"({first} stopped while training: it starts over)" in out


def test_the_stop_line_says_what_is_left(tmp_path):
    run_dirs = [run_dir_of(c) for c in demo_commands(tmp_path)]
    for run_dir in run_dirs[:-1]:
        RunRecorder(run_dir, {}).finish("finished")
    RunRecorder(run_dirs[-1], {}).finish("interrupted")
    line = stopped_line(tmp_path)
    assert f"{len(run_dirs) - 1} of {len(run_dirs)} demo runs ended" in line and "trains the other 1" in line
    assert f"({run_dirs[-1].name} stopped while training: it starts over)" in line
    RunRecorder(run_dirs[-1], {}).finish("diverged")  # every run ended: nothing starts over, nothing is left to train
    line = stopped_line(tmp_path)
    assert f"all {len(run_dirs)} demo runs had finished" in line
    assert "starts over" not in line and "trains the other" not in line
    assert "make play" not in line


class _FinishingRun:
    """A run's process that has trained its 4 steps once waited for a first time."""

    def __init__(self, command, **kwargs):
        self.recorder = RunRecorder(run_dir_of(command), {"total_steps": 4})
        self.waited = False

    def poll(self):
        return 0 if self.waited else None

    def wait(self, timeout=None):
        if not self.waited:
            self.waited = True
            self.recorder.log({"training/global_step": 2})
            self.recorder.update()  # run.json, as a run rewrites it every second
            raise subprocess.TimeoutExpired("train", timeout)
        self.recorder.log({"training/global_step": 4})
        self.recorder.finish("finished")
        return 0


def test_the_progress_lines_say_which_run_how_far_and_how_it_ended(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(demo.subprocess, "Popen", _FinishingRun)
    demo.run_demo_sweep(tmp_path, demo.StopRequests(), progress_every_s=0.01)
    names = [run_dir_of(c).name for c in demo_commands(tmp_path)]
    first, last = f"demo run 1/{len(names)} {names[0]}", f"demo run {len(names)}/{len(names)} {names[-1]}"
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [f"{first}: started", f"{first}: step 2 of 4", f"{first}: finished (step 4 of 4)"]
    assert len(lines) == 3 * len(names) and lines[-1] == f"{last}: finished (step 4 of 4)"
    demo.run_demo_sweep(tmp_path, demo.StopRequests())  # all ended, and quiet on a terminal
    assert capsys.readouterr().out == ""
