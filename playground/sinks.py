"""Metric sinks chosen by `trainer.logger`, as verl's `Tracking`: console, jsonl, file, tensorboard, wandb.

Every sink has `write(record, step)` and `close()` (SB3's KVWriter shape). The JSON-lines file and
`run.json` are always written: they are the run-directory contract the explorer and the diagnosis read.
Each tracker package (wandb) is imported inside its sink, so a run that does not name it never
loads it, and a missing one fails with one line naming what to install.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import pprint
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from playground.config import logger_names
from playground.metrics import STEP
from playground.runs import RunRecorder


def write_config(run_dir: Path, cfg: DictConfig) -> None:
    """The run's resolved config in `.hydra/config.yaml`, as Hydra writes it (runs started in-process too)."""
    path = run_dir / ".hydra" / "config.yaml"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(cfg, path, resolve=True)


def format_console_line(record: Mapping[str, Any], step: int) -> str:
    """verl's console line: `step:N - key:value - ...`, numbers only, values as `pprint.pformat` (v0.5+)."""
    parts = [f"step:{step}"]
    for key, value in record.items():
        if key == STEP or not isinstance(value, numbers.Number):
            continue
        value = value.item() if hasattr(value, "item") else value  # numpy scalars print as np.float64(...) otherwise
        parts.append(f"{key}:{pprint.pformat(value)}")
    return " - ".join(parts)


class ConsoleSink:
    def __init__(self, stream=None, prefix: str = ""):
        self.stream, self.prefix = stream, prefix

    def write(self, record: Mapping[str, float], step: int) -> None:
        line = self.prefix + format_console_line(record, step)
        try:
            from tqdm import tqdm

            tqdm.write(line, file=self.stream or sys.stdout)
        except ImportError:  # pragma: no cover
            print(line, file=self.stream or sys.stdout, flush=True)

    def close(self) -> None:
        pass


def verl_file_value(value: Any) -> Any:
    """One value as verl's file logger writes it (orjson): numbers as numbers, NaN and ±Inf as null."""
    value = value.item() if hasattr(value, "item") else value
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class FileSink:
    """verl's `file` logger: one `{"step": s, "data": {...}}` JSON line per step, written unbuffered.

    The path follows verl's `FileLogger`: `$VERL_FILE_LOGGER_PATH` if set, else
    `<root>/<project_name>/<experiment_name>.jsonl` with root `$VERL_FILE_LOGGER_ROOT`; where verl's root defaults
    to the working directory, ours defaults to the run dir, so a run's files stay together. An agent of a batch
    (`agent` not None) always writes under its own run dir: one env path would have every agent overwrite the
    others. The file is truncated at start, as verl's. `data` carries the whole record (`training/global_step`
    included, as verl's trainer logs it); NaN and ±Inf become null, as orjson writes them, so the diagnosis
    (`playground.runs.metrics_record`) reads such a value as absent: the always-written `metrics.jsonl` keeps them.
    """

    def __init__(self, run_dir: Path, project_name: str, experiment_name: str, agent: int | None = None):
        env_path = os.environ.get("VERL_FILE_LOGGER_PATH") if agent is None else None
        if env_path:
            self.path = Path(env_path)
        else:
            env_root = os.environ.get("VERL_FILE_LOGGER_ROOT") if agent is None else None
            root = Path(os.path.expanduser(env_root)) if env_root else run_dir
            self.path = root / project_name / f"{experiment_name}.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fp = open(self.path, "wb", buffering=0)

    def write(self, record: Mapping[str, Any], step: int) -> None:
        line = {"step": step, "data": {k: verl_file_value(v) for k, v in record.items()}}
        self.fp.write(json.dumps(line, allow_nan=False).encode() + b"\n")

    def close(self) -> None:
        self.fp.close()


class TensorBoardSink:
    """`add_scalar(key, value, step)` into `<run dir>/tensorboard` (verl uses `tensorboard_log/<project>/...`)."""

    def __init__(self, run_dir: Path):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"))

    def write(self, record: Mapping[str, float], step: int) -> None:
        for key, value in record.items():
            if key != STEP:
                self.writer.add_scalar(key, value, step)

    def close(self) -> None:
        self.writer.flush()
        self.writer.close()


class WandbSink:
    """Weights & Biases; `trainer.wandb_mode=offline` (the default) needs no network or account."""

    def __init__(self, cfg: DictConfig, run_dir: Path):
        try:
            import wandb
        except ImportError as e:
            raise RuntimeError("trainer.logger has 'wandb' but wandb is not installed: pip install wandb") from e
        self.wandb = wandb
        mode = os.environ.get("WANDB_MODE", cfg.trainer.get("wandb_mode", "offline"))
        self.run = wandb.init(project=cfg.trainer.project_name, name=cfg.trainer.experiment_name, dir=str(run_dir),
                              mode=mode, config=OmegaConf.to_container(cfg, resolve=True), reinit="create_new")

    def write(self, record: Mapping[str, float], step: int) -> None:
        self.run.log({k: v for k, v in record.items() if k != STEP}, step=step)

    def close(self) -> None:
        self.run.finish()


class ProgressBar:
    """A tqdm bar: steps, the score's window mean, ETA."""

    def __init__(self, total: int, desc: str):
        from tqdm import tqdm

        self.bar = tqdm(total=total, desc=desc, unit="step", dynamic_ncols=True, leave=True, file=sys.stderr)

    def write(self, record: Mapping[str, float], step: int) -> None:
        score = record.get("critic/score/mean", record.get("val/score"))
        if score is not None and math.isfinite(score):
            self.bar.set_postfix_str(f"score {score:.3g}", refresh=False)
        self.bar.update(step - self.bar.n)

    def close(self) -> None:
        self.bar.close()


class RunLogger:
    """All of one run's outputs: `run.json`, `metrics.jsonl`, samples, and the chosen sinks.

    Args:
        cfg: the run's config. run_dir: its output dir. facts: what the task adds to `run.json`.
        agent: the agent's index when several agents train as one batch (None for an ordinary run).
    """

    def __init__(self, cfg: DictConfig, run_dir: str | Path, facts: Mapping[str, Any], agent: int | None = None,
                 extra: Mapping[str, Any] | None = None):
        self.run_dir = Path(run_dir)
        info = {
            "task": cfg.task.name, "family": cfg.task.family, "scenario": cfg.scenario,
            "seed": int(cfg.trainer.seed), "device": str(cfg.trainer.device),
            "total_steps": int(cfg.trainer.total_training_steps), "score_target": float(cfg.task.score_target),
            "mystery": bool(cfg.trainer.get("mystery", False)), "agent": agent,
            "grad_clip_actor": cfg.actor_rollout_ref.actor.grad_clip, "memory_limit_gb": cfg.trainer.memory_limit_gb,
            **facts, **(extra or {}),
        }
        self.recorder = RunRecorder(self.run_dir, info)
        write_config(self.run_dir, cfg)
        loggers = logger_names(cfg)
        self.sinks: list[Any] = []
        if "console" in loggers and agent is None:  # a batch of agents would flood the console: one line per agent
            self.sinks.append(ConsoleSink())
        if "file" in loggers:
            self.sinks.append(FileSink(self.run_dir, cfg.trainer.project_name, cfg.trainer.experiment_name, agent))
        if "tensorboard" in loggers:
            self.sinks.append(TensorBoardSink(self.run_dir))
        if "wandb" in loggers:
            self.sinks.append(WandbSink(cfg, self.run_dir))
        if cfg.trainer.progress_bar and agent is None:
            self.sinks.append(ProgressBar(int(cfg.trainer.total_training_steps), f"{cfg.task.name}/{cfg.scenario}"))

    def log(self, record: Mapping[str, float]) -> None:
        step = int(record[STEP])
        self.recorder.log(record)
        for sink in self.sinks:
            sink.write(record, step)

    def log_samples(self, samples) -> None:
        self.recorder.log_samples(samples)

    def finish(self, status: str, error: str | None = None, **fields: Any) -> None:
        for sink in self.sinks:
            sink.close()
        self.recorder.finish(status, error, **fields)
        if error:
            print(f"run {self.run_dir} ended: {status}: {error}", file=sys.stderr)
