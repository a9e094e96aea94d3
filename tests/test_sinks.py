import json
import math

import numpy as np

from playground.diagnose.readers import read_any, read_tensorboard
from playground.metrics import STEP
from playground.sinks import FileSink, format_console_line


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


# ---- the trackers verl names: file ------------------------------------------------------------------------------
TINY_CARTPOLE = ["task=cartpole", "+debug=tiny"]


def finite(record):
    return {k: v for k, v in record.items() if math.isfinite(v)}


def test_file_logger_writes_verls_records_that_the_diagnosis_reads_back(train_run, monkeypatch):
    monkeypatch.delenv("VERL_FILE_LOGGER_PATH", raising=False)
    monkeypatch.delenv("VERL_FILE_LOGGER_ROOT", raising=False)
    _, run_dir = train_run([*TINY_CARTPOLE, "trainer.logger=[file]"])
    path = run_dir / "ppo-playground" / "cartpole-healthy.jsonl"  # <root>/<project_name>/<experiment_name>.jsonl
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [set(line) for line in lines] == [{"step", "data"}] * 4 and [line["step"] for line in lines] == [1, 2, 3, 4]
    ours, verls = read_any(run_dir).records, read_any(path).records
    assert len(ours) == 4 and verls == [finite(r) for r in ours]  # NaN/Inf are null in verl's format: read as absent


def test_file_logger_path_follows_verls_env_vars(tmp_path, monkeypatch):
    monkeypatch.delenv("VERL_FILE_LOGGER_PATH", raising=False)
    monkeypatch.setenv("VERL_FILE_LOGGER_ROOT", str(tmp_path / "root"))
    assert FileSink(tmp_path / "run", "proj", "exp").path == tmp_path / "root" / "proj" / "exp.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(tmp_path / "one.jsonl"))
    sink = FileSink(tmp_path / "run", "proj", "exp")
    sink.write({STEP: 1, "a": np.float32(0.5), "b": float("inf")}, 1)
    sink.close()
    line = '{"step": 1, "data": {"training/global_step": 1, "a": 0.5, "b": null}}\n'
    assert (tmp_path / "one.jsonl").read_text() == line
    # an agent of a batch keeps to its own run dir, or every agent would overwrite the one env path
    assert FileSink(tmp_path / "agent0", "proj", "exp", agent=0).path == tmp_path / "agent0" / "proj" / "exp.jsonl"
