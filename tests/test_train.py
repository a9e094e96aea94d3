"""The command line and the run lifecycle: bad input, statuses, determinism, sweeps."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from playground.metrics import is_known
from playground.rundir.runs import read_metrics_jsonl, read_run_info

from .conftest import ROOT

SMALL = ["task=cartpole", "env.num_envs=4", "env.rollout_length=16", "actor_rollout_ref.actor.ppo_mini_batch_size=32",
         "env.eval_episodes=4"]
VOLATILE = ("timing", "perf/")


def _cli(*args, timeout=120, env=(), **kw):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HYDRA_FULL_ERROR": "0", **dict(env)}
    return subprocess.run([sys.executable, "-m", "playground.train", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, **kw)


def test_bad_value_fails_before_compute_with_one_line(tmp_path):
    # a choice the schema refuses (playground.config.schema); tests/test_config.py holds the ranges' lines
    result = _cli("actor_rollout_ref.actor.loss_agg_mode=bogus", f"hydra.run.dir={tmp_path}/run")
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == ["error: actor_rollout_ref.actor.loss_agg_mode='bogus' is out of range: allowed one of "
                     "['token-mean', 'seq-mean-token-sum', 'seq-mean-token-mean', 'seq-mean-token-sum-norm']"]
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


NO_LR = ("the config has no key 'lr' (nothing would read it); nearest: actor_rollout_ref.actor.optim.lr, "
         "critic.optim.lr, world_model.lr")


@pytest.mark.parametrize("args", [["lr=abc"], ["+lr=0.01"], ["-m", "hydra/launcher=batched", "+lr=0.01,0.1"]],
                         ids=["plain", "added", "multirun"])
def test_a_key_the_config_lacks_fails_before_compute_with_one_line(tmp_path, args):
    # issue 49: `+lr=0.01` (Hydra's own hint for `lr=abc`) trained at the default lr, rc 0
    result = _cli(*args, "+debug=tiny", f"hydra.run.dir={tmp_path}/run", f"hydra.sweep.dir={tmp_path}/sweep")
    assert result.returncode == 2
    assert [line for line in result.stderr.splitlines() if line.strip()] == [f"error: {args[-1]}: {NO_LR}"]
    assert not (tmp_path / "run").exists() and not (tmp_path / "sweep").exists()


def test_a_sweepers_key_the_config_lacks_fails_before_any_job(tmp_path):
    # the batched launcher checks the jobs' overrides the sweeper made (a sweep file's params), not only argv's
    import shutil

    conf = tmp_path / "conf"
    shutil.copytree(ROOT / "conf", conf)
    (conf / "sweep" / "bad.yaml").write_text("# @package _global_\nhydra:\n  mode: MULTIRUN\n  sweeper:\n"
                                             "    params:\n      +lr: 0.1,0.2\n")
    result = _cli("hydra/launcher=batched", "+debug=tiny", "+sweep=bad", f"hydra.sweep.dir={tmp_path}/sweep",
                  env={"PLAYGROUND_CONF_DIR": str(conf)})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == f"error: +lr=0.1: {NO_LR}"
    assert not list((tmp_path / "sweep").glob("*/metrics.jsonl"))


def test_unknown_task_lists_the_known_ones():
    result = _cli("task=pong")
    assert result.returncode == 2
    assert result.stderr.strip().startswith("error: task='pong' is unknown: allowed one of [")
    assert "'cartpole'" in result.stderr


def test_same_config_and_seed_give_the_same_metrics(train_run):
    runs = [train_run([*SMALL, "trainer.total_training_steps=4"])[1] for _ in range(2)]
    a, b = (read_metrics_jsonl(r / "metrics.jsonl").records for r in runs)
    assert len(a) == len(b) == 4
    for x, y in zip(a, b):
        stable = {k: v for k, v in x.items() if not k.startswith(VOLATILE)}
        assert stable == {k: y[k] for k in stable}
    other = train_run([*SMALL, "trainer.total_training_steps=4", "trainer.seed=2"])[1]
    assert read_metrics_jsonl(other / "metrics.jsonl").records[-1]["actor/pg_loss"] != a[-1]["actor/pg_loss"]


def test_every_emitted_metric_is_in_the_glossary(train_run):
    _, run_dir = train_run([*SMALL, "trainer.total_training_steps=20", "world_model.enable=true",
                            "algorithm.use_kl_in_reward=true"])
    keys = {k for record in read_metrics_jsonl(run_dir / "metrics.jsonl").records for k in record}
    assert {"actor/pg_clipfrac", "critic/vf_explained_var", "world_model/loss", "actor/reward_kl_penalty",
            "episode/success_rate_cartpole", "val/score", "timing_s/update_actor"} <= keys
    assert [k for k in keys if not is_known(k)] == []


@pytest.mark.parametrize("signum, exit_code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl_c", "sigterm"])
def test_a_stopped_run_ends_with_status_interrupted(tmp_path, signum, exit_code):
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "playground.train", *SMALL, "trainer.total_training_steps=100000",
                             "trainer.logger=[]", "trainer.progress_bar=false", f"hydra.run.dir={run_dir}"],
                            cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            # a library loaded by an earlier test may leave SIGINT ignored in this process, and an
                            # ignored signal stays ignored in a child: give the child the default, as a shell does
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.default_int_handler))
    metrics = run_dir / "metrics.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline and not (metrics.exists() and metrics.stat().st_size > 0):
        time.sleep(0.1)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == exit_code, err
    info = read_run_info(run_dir)
    assert info["status"] == "interrupted" and info["last_step"] >= 1
    assert info["error"] == ("terminated by signal SIGTERM" if signum == signal.SIGTERM
                             else "stopped by you (Ctrl-C, or Stop in the explorer)")
    assert len(read_metrics_jsonl(metrics).records) == info["last_step"]


def test_joblib_sweep_runs_each_job_in_its_own_dir(tmp_path):
    result = _cli("-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", *SMALL,
                  "actor_rollout_ref.actor.optim.lr=1e-3,2e-3", "actor_rollout_ref.actor.clip_ratio_high=0.1,0.2",
                  "trainer.total_training_steps=2", "trainer.logger=[]", "trainer.progress_bar=false",
                  f"hydra.sweep.dir={tmp_path}", timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    jobs = sorted(p for p in tmp_path.iterdir() if p.is_dir() and (p / "run.json").exists())
    assert len(jobs) == 4
    seen = set()
    for job in jobs:
        info = read_run_info(job)
        assert info["status"] == "finished" and len(read_metrics_jsonl(job / "metrics.jsonl").records) == 2
        assert (job / "findings.json").exists()
        seen.add(tuple(sorted(o for o in info["overrides"] if "lr=" in o or "clip_ratio_high=" in o)))
    assert len(seen) == 4


def test_metrics_file_is_valid_json_lines_while_running(train_run):
    _, run_dir = train_run([*SMALL, "trainer.total_training_steps=2"])
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        json.loads(line)
    assert torch.get_num_threads() == 1


def test_a_short_run_on_a_terminal_shows_its_dir_a_compact_bar_and_a_summary(tmp_path):
    """`python -m playground.train task=reverse` on a terminal (a pseudo-terminal here): the run dir first, a progress
    bar with the task's score (val/accuracy) and a few numbers, a summary with the root cause and its fix; no number
    with more than 4 significant digits (verl's full line is `trainer.logger=[console]`)."""
    import fcntl
    import pty
    import re
    import struct
    import termios

    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))  # a 200-column terminal
    run_dir = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "playground.train", "task=reverse", "+debug=tiny",
                             "trainer.total_training_steps=3", "trainer.progress_bar=true",  # +debug=tiny turns it off
                             f"hydra.run.dir={run_dir}"], cwd=ROOT, env=env,
                            stdin=subprocess.DEVNULL, stdout=terminal, stderr=terminal)
    os.close(terminal)
    chunks = []
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # the terminal closed: the process ended
            break
        if not chunk:
            break
        chunks.append(chunk)
    assert proc.wait(timeout=120) == 0
    os.close(controller)
    out = b"".join(chunks).decode("utf-8", "replace").replace("\r", "\n")
    assert f"run dir: {run_dir}" in out.splitlines()[0]
    assert re.search(r"reverse/healthy: 100%.*3/3.*val/accuracy \d.*\| entropy .*\| grad_norm ", out)
    assert "step:1 - " not in out  # no console line unless asked for
    assert "run finished after 3 steps (total_training_steps reached)" in out
    assert "diagnosis: inconclusive (too little evidence for a verdict)" in out
    assert ("fix: .venv/bin/python -m playground.train task=reverse +debug=tiny trainer.progress_bar=true "
            "trainer.total_training_steps=30") in out
    numbers = re.findall(r"\d+\.\d+(?:e[-+]?\d+)?", out.replace(str(run_dir), ""))
    assert [n for n in numbers if len(n.split("e")[0].replace(".", "").lstrip("0")) > 4] == []
