import importlib
import json
import math
import os
import socket
import sys

import numpy as np
import pytest

from playground.diagnose.readers import read_any, read_tensorboard
from playground.metrics import STEP
from playground.rundir.sinks import FileSink, MlflowSink, SwanLabSink, format_console_line, mlflow_key, mlflow_params


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


# ---- the trackers verl names: file, mlflow, swanlab -------------------------------------------------------------
TINY_CARTPOLE = ["task=cartpole", "+debug=tiny"]


def needs(module: str):
    """The tracker's package: skipped where it is not installed (`pip install -e '.[dev]'` brings it), but never
    under CI, whose `make test` installs the dev extra: there a missing one fails."""
    if os.environ.get("CI"):
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=f"{module} not installed: pip install -e '.[trackers]'")


@pytest.fixture
def no_network(monkeypatch):
    """Internet sockets refuse to connect, proxies are unset, no tracker key is set; returns the attempts made."""
    attempts: list = []
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def guarded(real):
        def connect(self, address):
            if self.family in (socket.AF_INET, socket.AF_INET6):
                attempts.append(address)
                raise OSError(f"the network is off in this test: connect to {address!r}")
            return real(self, address)
        return connect

    monkeypatch.setattr(socket.socket, "connect", guarded(real_connect))
    monkeypatch.setattr(socket.socket, "connect_ex", guarded(real_connect_ex))
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
                "SWANLAB_API_KEY", "SWANLAB_MODE", "SWANLAB_LOG_DIR", "MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID"):
        monkeypatch.delenv(var, raising=False)
    return attempts


@pytest.fixture
def tiny_log(tiny_cfg):
    """What the tiny config's run writes about itself (`sinks.LogSpec`), resolved as the entry resolves it."""
    import torch

    from playground.run_spec import resolve_run

    return resolve_run([tiny_cfg], torch.device("cpu")).agents[0].log


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


def test_mlflow_names_and_params_are_verls():
    assert mlflow_key("val/pass@4") == "val/pass_at_4"
    assert mlflow_key("a//b/c (x)") == "a/b/c _x_"
    assert mlflow_key("actor/pg_loss") == "actor/pg_loss"
    assert mlflow_params({"a": {"b": 1, "c": [2, {"d": 3}]}}) == {"a/b": 1, "a/c/list_len": 2, "a/c/0": 2, "a/c/1/d": 3}


def test_mlflow_logs_to_a_file_store_in_the_run_dir_offline(train_run, no_network):
    needs("mlflow")
    from mlflow import MlflowClient

    _, run_dir = train_run([*TINY_CARTPOLE, "trainer.logger=[mlflow]"])
    client = MlflowClient(tracking_uri=(run_dir / "mlruns").as_uri())
    experiment = client.get_experiment_by_name("ppo-playground")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.run_name == "cartpole-healthy" and run.info.status == "FINISHED"
    assert run.data.params["trainer/experiment_name"] == "cartpole-healthy"
    ours = read_any(run_dir).records
    for key in ("actor/pg_loss", "critic/score/mean", "val/score"):
        history = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, key))
        expected = [(int(r[STEP]), r[key]) for r in ours if key in r]
        assert [s for s, _ in history] == [s for s, _ in expected]
        assert np.allclose([v for _, v in history], [v for _, v in expected], equal_nan=True)
    assert not no_network


def test_mlflow_sink_sanitises_names_and_honours_the_tracking_uri(tiny_log, tmp_path, no_network, monkeypatch):
    needs("mlflow")
    from mlflow import MlflowClient

    uri = (tmp_path / "elsewhere").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 asks for it for any file store
    sink = MlflowSink(tiny_log, tmp_path / "run")
    sink.write({STEP: 3, "val/pass@4": 0.75}, 3)
    sink.close()
    history = MlflowClient(tracking_uri=uri).get_metric_history(sink.run_id, "val/pass_at_4")
    assert [(m.step, m.value) for m in history] == [(3, 0.75)] and not (tmp_path / "run" / "mlruns").exists()


def swanlab_scalars(run_file):
    """The scalars of a `.swanlab` file, read with SwanLab's own record reader (internal to it: `swanlab sync` uses
    it; no public reader exists) as {key: [(step, value), ...]}."""
    from swanlab.proto.swanlab.record.v1.record_pb2 import Record
    from swanlab.sdk.internal.core_python.store import DataStoreReader

    reader, scalars = DataStoreReader(), {}
    reader.open(run_file)
    for data in reader:
        record = Record()
        record.ParseFromString(data)
        if record.HasField("scalar"):
            scalars.setdefault(record.scalar.key, []).append((record.scalar.step, record.scalar.value.number))
    reader.close()
    return scalars


def test_swanlab_logs_offline_into_the_run_dir(train_run, no_network):
    needs("swanlab")
    _, run_dir = train_run([*TINY_CARTPOLE, "trainer.logger=[swanlab]"])
    (swan_run,) = (run_dir / "swanlog").glob("run-*")
    assert (swan_run / "files" / "config.yaml").is_file()
    (run_file,) = swan_run.glob("*.swanlab")
    scalars = swanlab_scalars(run_file)
    ours = read_any(run_dir).records
    for key in ("actor/pg_loss", "critic/score/mean", "val/score"):
        expected = [(int(r[STEP]), r[key]) for r in ours if key in r]
        assert [s for s, _ in scalars[key]] == [s for s, _ in expected]
        assert np.allclose([v for _, v in scalars[key]], [v for _, v in expected], equal_nan=True)
    assert not no_network


def test_swanlab_refuses_an_agent_of_a_batch(tiny_log, tmp_path):
    with pytest.raises(RuntimeError, match="one run per process"):
        SwanLabSink(tiny_log, tmp_path, agent=0)


@pytest.mark.parametrize("module,sink", [("mlflow", MlflowSink), ("swanlab", SwanLabSink)])
def test_a_missing_tracker_fails_in_one_line_naming_the_extra(module, sink, tiny_log, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now raises ImportError
    with pytest.raises(RuntimeError, match=r"not installed: pip install 'ppo-playground\[trackers\]'") as error:
        sink(tiny_log, tmp_path)
    assert "\n" not in str(error.value)


class _Terminal:
    """A stream that says it is a terminal, so the progress bar draws on it."""

    def __init__(self):
        self.text = ""

    def write(self, s: str) -> int:
        self.text += s
        return len(s)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True


def test_the_progress_bar_shows_the_tasks_score_and_a_few_numbers_at_4_digits():
    from playground.rundir.sinks import ProgressBar

    terminal = _Terminal()
    bar = ProgressBar(3, "reverse/healthy", "val/accuracy", stream=terminal)
    bar.write({STEP: 0, "val/accuracy": 0.50390625}, 0)  # the step-0 validation
    bar.write({STEP: 1, "critic/score/mean": 0.16, "actor/entropy": 1.6612345, "actor/pg_clipfrac": 0.0,
               "actor/ppo_kl": 2.5823e-07, "actor/grad_norm": 0.0854812, "critic/vf_loss": 0.123456789}, 1)
    assert bar.postfix({}) == "val/accuracy 0.5039"  # a record without step metrics: the score it last knew
    bar.close()
    assert "val/accuracy 0.5039 | entropy 1.661 | clipfrac 0 | kl 2.582e-07 | grad_norm 0.08548" in terminal.text
    # only the postfix: tqdm's rate in front of it ("10280.16step/s") may hold any digits
    postfix = terminal.text[terminal.text.rindex("val/accuracy"):]
    assert "0.16" not in postfix and "0.123456789" not in postfix  # not the batch mean, not every key


def test_the_progress_bar_stays_off_where_stderr_is_no_terminal():
    import io

    from playground.rundir.sinks import ProgressBar

    stream = io.StringIO()
    bar = ProgressBar(3, "cartpole/healthy", "critic/score/mean", stream=stream)
    bar.write({STEP: 1, "critic/score/mean": 20.0}, 1)
    bar.close()
    assert stream.getvalue() == ""


def test_a_run_ends_with_a_summary_of_status_score_root_and_fix(train_run):
    from playground.diagnose import root_causes
    from playground.diagnose.run_summary import summary_lines
    from playground.rundir.runs import read_findings

    _, run_dir = train_run(["task=cartpole", "trainer.total_training_steps=2", "env.num_envs=2",
                            "env.rollout_length=8", "actor_rollout_ref.actor.ppo_mini_batch_size=16",
                            "env.eval_episodes=2"])
    lines = summary_lines(run_dir)
    root = root_causes.run_root(root_causes.chain(read_findings(run_dir)))
    fix = next(f["fix"] for f in read_findings(run_dir)["findings"] if f["id"] == root)
    assert lines[0] == "run finished after 2 steps (total_training_steps reached)"
    assert lines[1].startswith("score: critic/score/mean ") and "(target " in lines[1]
    assert lines[2].startswith(f"diagnosis: {root} (")
    fix_lines = [line for line in lines if line.startswith("fix: ")]
    assert fix_lines == ([f"fix: .venv/bin/python -m playground.train task=cartpole trainer.total_training_steps=2 "
                          f"env.num_envs=2 env.rollout_length=8 actor_rollout_ref.actor.ppo_mini_batch_size=16 "
                          f"env.eval_episodes=2 {fix}"] if fix else [])
    assert all(len(number) <= 6 for line in lines[:2] for number in line.split() if number[:1].isdigit())


def test_a_too_short_run_ends_inconclusive_with_train_longer_as_its_fix(train_run):
    from playground.diagnose.run_summary import summary_lines

    _, run_dir = train_run(["task=reverse", "+debug=tiny", "trainer.total_training_steps=2"])
    lines = summary_lines(run_dir)
    assert lines[2] == "diagnosis: inconclusive (too little evidence for a verdict)"
    assert lines[3] == ("fix: .venv/bin/python -m playground.train task=reverse +debug=tiny "
                        "trainer.total_training_steps=20")
