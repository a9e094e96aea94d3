"""`make play`'s demo: the runs it trains, and how it stops."""

import os
import signal
import subprocess
import sys
import time

from playground.demo import demo_commands, explorer_roots
from playground.runs import read_run_info

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
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    info = read_run_info(first)
    assert info["status"] == "interrupted" and "SIGTERM" in info["error"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [first.name]  # no later run was started


def test_the_explorer_lists_the_demo_runs_once(tmp_path):
    roots = explorer_roots(ROOT / "outputs" / "demo").split(os.pathsep)
    assert roots == [str(ROOT / "outputs"), str(ROOT / "multirun")]  # outputs/demo lies inside outputs/
    assert explorer_roots(tmp_path).split(os.pathsep)[-1] == str(tmp_path)
