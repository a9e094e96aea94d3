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
