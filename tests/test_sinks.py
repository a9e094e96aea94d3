import math

import numpy as np

from playground.diagnose.readers import read_tensorboard
from playground.metrics import STEP
from playground.sinks import format_console_line


def test_console_line_is_verls():
    line = format_console_line({STEP: 3, "actor/pg_loss": -0.005, "critic/vf_loss": 14.947, "note": "x",
                                "val/score": float("nan")}, 3)
    assert line == "step:3 - actor/pg_loss:-0.005 - critic/vf_loss:14.947 - val/score:nan"


def test_console_line_prints_numpy_scalars_as_numbers():
    assert format_console_line({"critic/score/mean": np.float64(20.3), "n": np.int64(4)}, 1) == \
        "step:1 - critic/score/mean:20.3 - n:4"


def test_a_gym_runs_console_lines_carry_plain_numbers(train_run, capsys):
    train_run(["task=cartpole", "trainer.total_training_steps=2", "env.num_envs=4", "env.rollout_length=32",
               "actor_rollout_ref.actor.ppo_mini_batch_size=64", "env.eval_episodes=2", "trainer.logger=[console]"])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("step:")]
    assert len(lines) == 2 and "critic/score/mean:" in lines[1] and "np." not in "".join(lines)


def test_tensorboard_and_wandb_offline_sinks(train_run, monkeypatch, tmp_path):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    _, run_dir = train_run(["task=cartpole", "trainer.total_training_steps=2", "env.num_envs=2",
                            "env.rollout_length=8", "actor_rollout_ref.actor.ppo_mini_batch_size=16",
                            "env.eval_episodes=2", "trainer.logger=[console,tensorboard,wandb]"])
    read = read_tensorboard(run_dir / "tensorboard")
    assert read.steps == [1, 2] and not math.isnan(read.records[0]["actor/pg_loss"])
    assert list((run_dir / "wandb").glob("offline-run-*")), "wandb wrote no offline run"
