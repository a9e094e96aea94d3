"""Metric sinks chosen by `trainer.logger`, as verl's `Tracking`: console, jsonl, file, tensorboard, wandb, mlflow,
swanlab.

Every sink has `write(record, step)` and `close()` (SB3's KVWriter shape). The JSON-lines file and
`run.json` are always written: they are the run-directory contract the explorer and the diagnosis read.
Each tracker package (wandb, mlflow, swanlab) is imported inside its sink, so a run that does not name it never
loads it, and a missing one fails with one line naming what to install.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import pprint
import re
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO, cast

from omegaconf import OmegaConf

from playground.metric_names import ACTOR_GRAD_NORM, ENTROPY, ENTROPY_LOSS, PG_CLIPFRAC, PPO_KL, SCORE_MEAN
from playground.metrics import STEP, fmt
from playground.rundir.runs import RunRecorder

TRACKERS_EXTRA = "pip install 'ppo-playground[trackers]'"


@dataclass(frozen=True)
class LogSpec:
    """What one run writes about itself and where (`trainer.logger` and its settings), resolved at the entry."""

    config: Mapping[str, Any]  # the resolved config as plain data: `.hydra/config.yaml` and the trackers' config
    info: Mapping[str, Any]  # run.json's facts from the config (task, scenario, seed, ...)
    loggers: tuple[str, ...]
    project_name: str
    experiment_name: str
    wandb_mode: str  # trainer.wandb_mode, unless $WANDB_MODE says otherwise
    progress_bar: bool

    @property
    def label(self) -> str:
        return f"{self.info['task']}/{self.info['scenario']}"


def write_config(run_dir: Path, config: Mapping[str, Any]) -> None:
    """The run's resolved config in `.hydra/config.yaml`, as Hydra writes it (runs started in-process too)."""
    path = run_dir / ".hydra" / "config.yaml"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(OmegaConf.create(dict(config)), path)


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
    def __init__(self, stream: TextIO | None = None, prefix: str = "") -> None:
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
    (`playground.rundir.runs.metrics_record`) reads such a value as absent: the always-written `metrics.jsonl` keeps
    them.
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

    def __init__(self, spec: LogSpec, run_dir: Path):
        try:
            import wandb
        except ImportError as e:
            raise RuntimeError("trainer.logger has 'wandb' but wandb is not installed: pip install wandb") from e
        self.wandb = wandb
        mode = cast(Literal["online", "offline", "disabled", "shared"],  # wandb checks the mode itself
                    os.environ.get("WANDB_MODE", spec.wandb_mode))
        self.run = wandb.init(project=spec.project_name, name=spec.experiment_name, dir=str(run_dir),
                              mode=mode, config=dict(spec.config), reinit="create_new")

    def write(self, record: Mapping[str, float], step: int) -> None:
        self.run.log({k: v for k, v in record.items() if k != STEP}, step=step)

    def close(self) -> None:
        self.run.finish()


# MLflow refuses metric names outside these characters; verl's `_MlflowLoggingAdapter` rewrites them the same way.
_MLFLOW_BAD_CHARS = re.compile(r"[^/\w.\- :]")
_MLFLOW_SLASHES = re.compile(r"/+")
MLFLOW_MAX_PARAM = 6000  # MLflow's longest param value


def mlflow_key(key: str) -> str:
    """A metric name MLflow accepts, as verl makes it: `@` → `_at_`, runs of `/` → one, other bad characters → `_`."""
    return _MLFLOW_BAD_CHARS.sub("_", _MLFLOW_SLASHES.sub("/", key.replace("@", "_at_")))


def mlflow_params(config: Any, prefix: str = "") -> dict[str, Any]:
    """The config as MLflow params, as verl flattens it: nested keys joined by `/`, a list as `list_len` plus its
    items by index."""
    if isinstance(config, list):
        config = {"list_len": len(config), **{str(i): v for i, v in enumerate(config)}}
    if not isinstance(config, dict):
        return {prefix: config}
    params: dict[str, Any] = {}
    for key, value in config.items():
        params.update(mlflow_params(value, f"{prefix}/{key}" if prefix else str(key)))
    return params


class MlflowSink:
    """MLflow, as verl starts it: the experiment is `trainer.project_name`, the run is named
    `trainer.experiment_name`, the resolved config is logged as params, metric names are sanitised (`mlflow_key`).

    The store is `$MLFLOW_TRACKING_URI` if set (verl's own default there is `sqlite:////tmp/mlruns.db`, which needs
    SQLAlchemy and alembic), else MLflow's file store at `<run dir>/mlruns`: offline, nothing to install beyond
    mlflow-skinny, and no seconds-long database set-up per run. MLflow 3 keeps the file store in maintenance mode
    behind `MLFLOW_ALLOW_FILE_STORE=true`, which this sets (unless already set) for that default store only.
    `$MLFLOW_RUN_ID` attaches to an existing run, as in verl (not for an agent of a batch). The client API, not
    `mlflow.start_run`, so that the agents of a batch each keep a run in one process.
    """

    def __init__(self, spec: LogSpec, run_dir: Path, agent: int | None = None):
        try:
            from mlflow import MlflowClient
            from mlflow.entities import Metric, Param
        except ImportError as e:
            raise RuntimeError(f"trainer.logger has 'mlflow' but mlflow is not installed: {TRACKERS_EXTRA}") from e
        self.Metric = Metric
        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            uri = (run_dir / "mlruns").resolve().as_uri()
        self.client = MlflowClient(tracking_uri=uri)
        run_id = os.environ.get("MLFLOW_RUN_ID") if agent is None else None
        if run_id:
            self.run_id = run_id
        else:
            project = spec.project_name
            experiment = self.client.get_experiment_by_name(project)
            experiment_id = experiment.experiment_id if experiment else self.client.create_experiment(project)
            self.run_id = self.client.create_run(experiment_id, run_name=spec.experiment_name).info.run_id
        params = mlflow_params(dict(spec.config))
        self.client.log_batch(self.run_id, params=[Param(mlflow_key(k), str(v)[:MLFLOW_MAX_PARAM])
                                                   for k, v in params.items()])

    def write(self, record: Mapping[str, float], step: int) -> None:
        now = int(time.time() * 1000)
        metrics = [self.Metric(mlflow_key(k), float(v), now, step) for k, v in record.items()
                   if k != STEP and isinstance(v, numbers.Number)]
        self.client.log_batch(self.run_id, metrics=metrics)

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


class SwanLabSink:
    """SwanLab, as verl starts it (project, experiment name, config with `FRAMEWORK: verl`, `$SWANLAB_LOG_DIR`,
    `$SWANLAB_MODE`, `$SWANLAB_API_KEY`), but offline unless told otherwise: verl's mode defaults to `cloud`, ours to
    `offline`, which writes `<run dir>/swanlog/run-*/` and opens no connection; `swanlab sync <that dir>` uploads it
    later. The API key logs in only for a mode that talks to the cloud; prompts are off (`interactive=False`), so a
    run never waits on input. SwanLab holds one run per process, so an agent of a batch cannot have one.
    """

    def __init__(self, spec: LogSpec, run_dir: Path, agent: int | None = None):
        if agent is not None:
            raise RuntimeError("trainer.logger has 'swanlab', which holds one run per process: a batch of agents "
                               "cannot each have one; train them one by one or drop swanlab")
        try:
            import swanlab
        except ImportError as e:
            raise RuntimeError(f"trainer.logger has 'swanlab' but swanlab is not installed: {TRACKERS_EXTRA}") from e
        mode = os.environ.get("SWANLAB_MODE", "offline")
        api_key = os.environ.get("SWANLAB_API_KEY")
        if api_key and mode in ("cloud", "online"):
            swanlab.login(api_key=api_key)
        config = {"FRAMEWORK": "verl", **spec.config}
        self.log_dir = Path(os.environ.get("SWANLAB_LOG_DIR", run_dir / "swanlog"))
        self.run = swanlab.init(project=spec.project_name, name=spec.experiment_name, config=config,
                                log_dir=str(self.log_dir), mode=mode, settings=swanlab.Settings(interactive=False))

    def write(self, record: Mapping[str, float], step: int) -> None:
        self.run.log({k: v for k, v in record.items() if k != STEP and isinstance(v, numbers.Number)}, step=step)

    def close(self) -> None:
        self.run.finish()


class ProgressBar:
    """The terminal's view of a run (`trainer.progress_bar`, on a terminal only): a tqdm bar of steps, the task's
    score and the few numbers a reader of the guide looks at first, each to 4 significant digits. verl's full
    `step:N - key:value` line is the `console` logger's (`trainer.logger=[console]`)."""

    # (label, the metrics that give it, first found first): the guide's first checks (§11.2) beside the score
    SHOWN = (("entropy", (ENTROPY, ENTROPY_LOSS)), ("clipfrac", (PG_CLIPFRAC,)),
             ("kl", (PPO_KL,)), ("grad_norm", (ACTOR_GRAD_NORM,)))

    def __init__(self, total: int, desc: str, score_metric: str, stream: TextIO | None = None) -> None:
        from tqdm import tqdm

        # disable=None: no bar where stderr is not a terminal (a log file, a pipe), as pip does
        self.bar = tqdm(total=total, desc=desc, unit="step", dynamic_ncols=True, leave=True,
                        file=stream or sys.stderr, disable=None)
        self.score_metric = score_metric
        self.score: float | None = None  # the last known: token tasks validate every test_freq steps

    def postfix(self, record: Mapping[str, float]) -> str:
        score = record.get(self.score_metric)
        if score is not None and math.isfinite(score):
            self.score = score
        parts = [f"{self.score_metric} {fmt(self.score, none='-')}"]
        for label, keys in self.SHOWN:
            value = next((record[k] for k in keys if k in record), None)
            if value is not None:
                parts.append(f"{label} {fmt(float(value))}")
        return " | ".join(parts)

    def write(self, record: Mapping[str, float], step: int) -> None:
        self.bar.set_postfix_str(self.postfix(record), refresh=False)
        self.bar.update(step - self.bar.n)

    def close(self) -> None:
        self.bar.close()


class RunLogger:
    """All of one run's outputs: `run.json`, `metrics.jsonl`, samples, and the chosen sinks.

    Args:
        spec: what the run writes and where. run_dir: its output dir. facts: what the task adds to `run.json`.
        agent: the agent's index when several agents train as one batch (None for an ordinary run).
    """

    def __init__(self, spec: LogSpec, run_dir: str | Path, facts: Mapping[str, Any], agent: int | None = None,
                 extra: Mapping[str, Any] | None = None):
        self.run_dir = Path(run_dir)
        info = {**spec.info, "agent": agent, **facts, **(extra or {})}
        self.recorder = RunRecorder(self.run_dir, info)
        write_config(self.run_dir, spec.config)
        loggers = spec.loggers
        self.sinks: list[Any] = []
        if "console" in loggers and agent is None:  # a batch of agents would flood the console: one line per agent
            self.sinks.append(ConsoleSink())
        if "file" in loggers:
            self.sinks.append(FileSink(self.run_dir, spec.project_name, spec.experiment_name, agent))
        if "tensorboard" in loggers:
            self.sinks.append(TensorBoardSink(self.run_dir))
        if "wandb" in loggers:
            self.sinks.append(WandbSink(spec, self.run_dir))
        if "mlflow" in loggers:
            self.sinks.append(MlflowSink(spec, self.run_dir, agent))
        if "swanlab" in loggers:
            self.sinks.append(SwanLabSink(spec, self.run_dir, agent))
        if spec.progress_bar and agent is None:
            print(f"run dir: {self.run_dir}", file=sys.stderr)
            self.sinks.append(ProgressBar(int(spec.info["total_steps"]), spec.label,
                                          info.get("score_metric") or SCORE_MEAN))

    def log(self, record: Mapping[str, float]) -> None:
        step = int(record[STEP])
        self.recorder.log(record)
        for sink in self.sinks:
            sink.write(record, step)

    def log_samples(self, samples: Iterable[Mapping[str, Any]]) -> None:
        self.recorder.log_samples(samples)

    def log_tokens(self, records: Iterable[Mapping[str, Any]]) -> int:
        """Token records (`runs.TOKENS`); returns the bytes written."""
        return self.recorder.log_tokens(records)

    def update(self, **fields: Any) -> None:
        """More facts for run.json."""
        self.recorder.update(**fields)

    def finish(self, status: str, error: str | None = None, **fields: Any) -> None:
        for sink in self.sinks:
            sink.close()
        self.recorder.finish(status, error, **fields)
        if error:
            print(f"run {self.run_dir} ended: {status}: {error}", file=sys.stderr)
