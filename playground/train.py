"""The Hydra entry point: `python -m playground.train task=cartpole scenario=lr_too_high [key=value ...]`.

Composes the config, checks it before any compute (one clear line and exit code 2 on a bad value), trains
into Hydra's output dir, and records how the run ended in `run.json` whatever happens. `-m` sweeps work with
any Hydra launcher (basic, joblib, submitit, and `hydra/launcher=batched` for many agents in one process).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import hydra
import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from playground.config import (
    CONF_DIR,
    ConfigError,
    check_group_overrides,
    check_keys,
    check_scenario_applies,
    resolve_deprecated,
    validate,
    with_default_scenario,
)
from playground.config.overrides import command
from playground.interrupts import exit_code, handle_stops
from playground.step.perf import resolve_device
from playground.step.stopping import AgentOutcome

if TYPE_CHECKING:
    from playground.step.trainer import Trainer
    from playground.tasks.base import Task

EXIT_BAD_CONFIG = 2


def prepare(cfg: DictConfig) -> torch.device:
    """Validate, pick the device and pin the torch threads; raises ConfigError before any compute."""
    check_scenario_applies(cfg)
    for note in resolve_deprecated(cfg):
        print(f"note: {note}", file=sys.stderr)
    validate(cfg)
    device = resolve_device(cfg.trainer.device)
    if device.type == "cpu":
        torch.set_num_threads(int(cfg.trainer.num_threads))
    return device


def run_facts(overrides: Sequence[str], device: torch.device) -> dict:
    """What `run.json` says about how a run was launched: its overrides, the command that reruns it, where it ran."""
    return {"overrides": list(overrides), "command": command(overrides), "device": str(device),
            "num_threads": torch.get_num_threads() if device.type == "cpu" else None}


@dataclass
class Fitted:
    """What `fit` trained: the trainer (its task and models, inspectable) and what happened to each agent."""

    trainer: Trainer
    outcomes: list[AgentOutcome]

    @property
    def statuses(self) -> list[str]:
        return [outcome.status for outcome in self.outcomes]


def fit(cfgs: Sequence[DictConfig], run_dirs: Sequence[str | Path], overrides: Sequence[Sequence[str]],
        num_threads: int | None = None, task: Task | None = None) -> Fitted:
    """The one in-process training entry: check K configs, train them as K agents of one `Trainer` (K = 1 for an
    ordinary run), and write each run dir's `findings.json`; returns the trainer and each agent's outcome.

    Args:
        overrides: each job's command-line overrides (recorded in run.json with the command that reruns it).
        num_threads: torch threads on CPU instead of the configs' `trainer.num_threads` (a batch of agents).
        task: a task built by the caller (see `playground.tasks.base.Task`); default: the one the config names.
    """
    devices = [prepare(cfg) for cfg in cfgs]  # every job is checked before any compute
    if num_threads is not None and devices[0].type == "cpu":
        torch.set_num_threads(num_threads)
    extras = [run_facts(o, devices[0]) for o in overrides]
    before = before_onset(cfgs, overrides)
    trainer = build_trainer(cfgs, run_dirs, devices[0], extras, task, before)
    outcomes = trainer.fit()
    for cfg, run_dir in zip(cfgs, run_dirs):
        write_findings(run_dir, cfg)
    return Fitted(trainer, outcomes)


def before_onset(cfgs: Sequence[DictConfig], overrides: Sequence[Sequence[str]]) -> list[DictConfig] | None:
    """The configs K checked configs train with until their `onset_step` (shared by a batch: not a per-agent key),
    or None when the scenario's cause is there from the start (`config.onset`)."""
    if cfgs[0].get("onset_step") is None:
        return None
    from playground.config.onset import config_before_onset

    return [config_before_onset(cfg, o) for cfg, o in zip(cfgs, overrides)]


def build_trainer(cfgs: Sequence[DictConfig], run_dirs: Sequence[str | Path], device: torch.device,
                  extra_infos: Sequence[dict] | None = None, task: Task | None = None,
                  before: Sequence[DictConfig] | None = None) -> Trainer:
    """The trainer of K checked configs (`prepare`): the configs resolved once into a `RunSpec`, and a token task's
    SFT base made ready first (a base that must build says so before the trainer starts); nothing below reads a
    config. `task`: a task built by the caller instead of the spec's; `before`: the configs the run trains with
    until its onset step (`before_onset`)."""
    from playground.run_spec import resolve_run
    from playground.step.trainer import Trainer
    from playground.tasks.specs import TokenTaskSpec

    spec = resolve_run(cfgs, device, before)
    infos = list(extra_infos) if extra_infos is not None else [{} for _ in cfgs]
    prepared_base = None
    if task is None and isinstance(spec.task, TokenTaskSpec):
        from playground.tasks.base_build import prepare_base

        prepared_base = prepare_base(spec.task.base, run_dirs, [agent.log.info for agent in spec.agents], infos)
    return Trainer(spec, list(run_dirs), device, extra_infos=infos, task=task, prepared_base=prepared_base)


def build_task_for(cfgs: Sequence[DictConfig], device: torch.device) -> Task:
    """The task of K configs on its own, resolved as `build_trainer` resolves it (its SFT base loaded, or built
    silently): for a test, a benchmark or a figure that drives a task without a trainer."""
    from playground.run_spec import resolve_run
    from playground.tasks import build_task
    from playground.tasks.base_build import base_model_for
    from playground.tasks.specs import TokenTaskSpec

    spec = resolve_run(cfgs, device)
    prepared = base_model_for(spec.task.base) if isinstance(spec.task, TokenTaskSpec) else None
    return build_task(spec.task, spec.family, device, prepared)


def run(cfg: DictConfig, run_dir: str | Path, overrides: Sequence[str] = ()) -> str:
    """Train one config into `run_dir`; returns the run's status."""
    return fit([cfg], [run_dir], [overrides]).outcomes[0].status


def needs_own_process(cfg: DictConfig) -> bool:
    """A memory-capped run is judged on its process's memory growth (on CPU), which earlier runs in the same
    process move (an exercise session, a long test session): such a run trains in a process of its own."""
    return cfg.trainer.memory_limit_gb is not None


def run_in_own_process(overrides: Sequence[str], run_dir: str | Path, show_stderr: bool = False) -> str:
    """`python -m playground.train <overrides>` into `run_dir` in a child process; returns the status run.json
    records ("failed" when the child wrote none)."""
    from playground.rundir.runs import read_run_info

    subprocess.run([sys.executable, "-m", "playground.train", *overrides, f"hydra.run.dir='{run_dir}'"],
                   cwd=Path(__file__).resolve().parents[1], env={**os.environ, "OMP_NUM_THREADS": "1"},
                   stdout=subprocess.DEVNULL, stderr=None if show_stderr else subprocess.DEVNULL, check=False)
    return (read_run_info(Path(run_dir)) or {}).get("status", "failed")


def objective(run_dir: str | Path, cfg: DictConfig) -> float:
    """What the run returns to a Hydra sweeper (`trainer.objective`), from its `findings.json` and metrics.

    `score`: the task's progress towards its target, `1 - (target - score) / max(|target|, 1)` (1 at the target;
    the score is `playground.rundir.score.run_score`, the one the diagnosis and the explorer's sweep map read), minus 1
    when the diagnosis found a warning or worse. `largest_healthy`: `log10` of `trainer.objective_key`'s value when
    the run is healthy (no warning) and reaches its target, else that minus 10, so that maximising it finds the
    largest value that still trains healthily. A run with no score yet scores as far from its target as it gets.
    """
    from playground.diagnose.root_causes import is_problem
    from playground.rundir.runs import read_findings
    from playground.rundir.score import run_score

    run_dir = Path(run_dir)
    score = run_score(run_dir)  # the score the diagnosis and the explorer's sweep map read
    target = float(cfg.task.score_target)
    progress = 1.0 - (target - score) / max(abs(target), 1.0) if score is not None else -1.0
    bad = any(is_problem(f) for f in (read_findings(run_dir) or {}).get("findings", []))
    if cfg.trainer.objective == "largest_healthy":
        value = math.log10(float(OmegaConf.select(cfg, cfg.trainer.objective_key)))
        return value if not bad and progress >= 1.0 else value - 10.0
    return progress - (1.0 if bad else 0.0)


def write_findings(run_dir: str | Path, cfg: DictConfig | None = None) -> None:
    """Diagnose the finished run into `findings.json` (the explorer lists runs without re-diagnosing); `cfg`, the
    run's config, spares reading back the `.hydra/config.yaml` written from it."""
    from playground.diagnose.sources import diagnose_run_dir

    diagnose_run_dir(Path(run_dir), config=cfg)


@hydra.main(config_path=CONF_DIR, config_name="config", version_base="1.3")
def hydra_main(cfg: DictConfig) -> float | None:
    hc = HydraConfig.get()
    try:
        run(cfg, hc.runtime.output_dir, list(hc.overrides.task))
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(EXIT_BAD_CONFIG)
    except KeyboardInterrupt as stop:
        print("interrupted: run.json says so; metrics so far are kept", file=sys.stderr)
        sys.exit(exit_code(stop))
    from playground.diagnose.run_summary import summary_lines

    print("\n".join(summary_lines(hc.runtime.output_dir)), file=sys.stderr)
    return objective(hc.runtime.output_dir, cfg)  # a diverged or out-of-memory run scores with its finding's penalty


def overrides_in(argv: Sequence[str]) -> list[str]:
    """The overrides among the command line's arguments: not Hydra's flags (`-m`, `--cfg job`) or their values."""
    return [a for a in argv if not a.startswith("-") and ("=" in a or a.startswith("~"))]


def main() -> None:
    try:
        check_group_overrides(overrides_in(sys.argv[1:]))
        check_keys(overrides_in(sys.argv[1:]))  # every job's keys, before Hydra composes or sweeps any
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(EXIT_BAD_CONFIG)
    sys.argv = [sys.argv[0], *with_default_scenario(sys.argv[1:])]
    handle_stops()
    hydra_main()


if __name__ == "__main__":
    main()
