"""`hydra/launcher=batched`: the jobs of a multirun sweep that share shapes train as K agents of one Trainer.

Job handling mirrors Hydra's `BasicLauncher` and `hydra.core.utils.run_job` (job dirs, `.hydra/` files, callbacks,
`JobReturn`s); jobs that cannot join a batch run one after another through `run_job`, after a line saying why.
Hydra imports every plugin at startup, so torch and the playground are imported only when a sweep launches
(and without registering the module in `sys.modules`, so no `from __future__ import annotations` here:
dataclasses would fail to resolve their string annotations).
"""

import copy
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import (
    JobReturn,
    JobRuntime,
    JobStatus,
    _save_config,
    configure_log,
    filter_overrides,
    run_job,
    setup_globals,
)
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

log = logging.getLogger(__name__)


@dataclass
class BatchedLauncherConf:
    _target_: str = "hydra_plugins.playground_batched.batched_launcher.BatchedLauncher"
    # the most agents in one batch; a larger group of compatible jobs is split into several batches
    max_agents: int = 1024
    # the device batches train on; null: the jobs' own trainer.device
    device: Any = None
    # torch threads of a batch on CPU: auto = every core for two or more agents; null = the jobs' trainer.num_threads
    num_threads: Any = "auto"


ConfigStore.instance().store(group="hydra/launcher", name="batched", node=BatchedLauncherConf, provider="playground")


@dataclass
class _Job:
    idx: int
    overrides: list[str]
    config: DictConfig  # the full sweep config of this job, `hydra` node included
    task_cfg: DictConfig | None = None  # without `hydra`, what the task function would receive
    hydra_cfg: DictConfig | None = None  # the `hydra` node, output dir resolved (`hydra.yaml`)
    output_dir: str = ""


class BatchedLauncher(Launcher):
    def __init__(self, max_agents: int = 1024, device: Any = None, num_threads: Any = "auto") -> None:
        from playground.batched import batch_threads

        super().__init__()
        self.max_agents = int(max_agents)
        self.device = device
        batch_threads(num_threads, 2)  # a bad value fails here, before any job runs
        self.num_threads = num_threads
        self.config: DictConfig | None = None
        self.task_function: TaskFunction | None = None
        self.hydra_context: HydraContext | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    # ---- one job's files, as run_job writes them ---------------------------------------------------------
    def _compose(self, overrides: Sequence[str], idx: int) -> _Job:
        config = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        with open_dict(config):
            config.hydra.job.id = idx
            config.hydra.job.num = idx
            if self.device is not None:
                config.trainer.device = str(self.device)
        return _Job(idx, list(overrides), config)

    def _prepare_dir(self, job: _Job) -> None:
        """Resolve the job's output dir and write its `.hydra/` files (run_job's steps before the task runs)."""
        config = job.config
        HydraConfig.instance().set_config(config)
        output_dir = str(OmegaConf.select(config, "hydra.sweep.dir"))
        output_dir = str(Path(output_dir) / str(OmegaConf.select(config, "hydra.sweep.subdir")))
        with read_write(config.hydra.runtime), open_dict(config.hydra.runtime):
            config.hydra.runtime.output_dir = str(Path(output_dir).absolute())
        HydraConfig.instance().set_config(config)
        task_cfg = copy.deepcopy(config)
        with read_write(task_cfg), open_dict(task_cfg):
            del task_cfg["hydra"]
        job.task_cfg, job.hydra_cfg = task_cfg, copy.deepcopy(HydraConfig.instance().cfg)
        job.output_dir = config.hydra.runtime.output_dir
        Path(job.output_dir).mkdir(parents=True, exist_ok=True)
        configure_log(config.hydra.job_logging, config.hydra.verbose)  # opens the job's `<name>.log`, as run_job
        if config.hydra.output_subdir is not None:
            hydra_output = Path(job.output_dir) / str(config.hydra.output_subdir)
            _save_config(task_cfg, "config.yaml", hydra_output)
            _save_config(job.hydra_cfg, "hydra.yaml", hydra_output)
            _save_config(config.hydra.overrides.task, "overrides.yaml", hydra_output)

    def _job_return(self, job: _Job, status: JobStatus, value: Any) -> JobReturn:
        ret = JobReturn(overrides=list(OmegaConf.to_container(job.config.hydra.overrides.task)), cfg=job.task_cfg,
                        hydra_cfg=job.hydra_cfg, working_dir=str(Path.cwd()),
                        task_name=JobRuntime.instance().get("name"), status=status)
        ret.return_value = value
        return ret

    def _callback(self, job: _Job, name: str, **kwargs: Any) -> None:
        """Hydra's job callbacks, with the job's config current in `HydraConfig` as run_job has it."""
        orig_hydra_cfg = HydraConfig.instance().cfg
        HydraConfig.instance().set_config(job.config)
        try:
            getattr(self.hydra_context.callbacks, name)(config=job.config, **kwargs)
        finally:
            HydraConfig.instance().cfg = orig_hydra_cfg

    def _unknown_key(self, job_overrides: Sequence[Sequence[str]]) -> str | None:
        """The first job override of a key its config lacks, as one line (the command line's are checked before
        Hydra starts, `train.main`; these are the sweeper's too, `hydra.sweeper.params`). Each job's keys are those of
        its group overrides' config, composed once per distinct set of them."""
        from playground.config import config_groups
        from playground.config.keys import config_keys, unknown_key_error
        from playground.config.overrides import parse_all

        groups = config_groups()
        keys: dict[tuple[str, ...], list[str]] = {}
        for overrides in job_overrides:
            parsed = parse_all(overrides)
            chosen = tuple(o.text for o in parsed if o.key in groups)
            if chosen not in keys:
                loader = self.hydra_context.config_loader
                keys[chosen] = config_keys(loader.load_sweep_config(self.config, list(chosen)))
            error = unknown_key_error(parsed, keys[chosen], groups)
            if error:
                return error
        return None

    # ---- the sweep ---------------------------------------------------------------------------------------
    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from playground.batched import batch_threads, plan_batches, train_batch
        from playground.config import ConfigError, check_scenario_applies, validate
        from playground.sweep import ProgressPrinter, SweepProgress, print_summary
        from playground.train import EXIT_BAD_CONFIG, objective

        setup_globals()
        assert self.config is not None and self.hydra_context is not None and self.task_function is not None
        started = time.time()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        log.info(f"Launching {len(job_overrides)} jobs as batches of agents (max_agents={self.max_agents})")
        unknown = self._unknown_key(job_overrides)
        if unknown:  # before any job composes (Hydra would refuse a plain one in many lines, accept a `+` one)
            print(f"error: {unknown}", file=sys.stderr)
            sys.exit(EXIT_BAD_CONFIG)  # an exception would reach the user as Hydra's traceback
        jobs = [self._compose(o, initial_job_idx + i) for i, o in enumerate(job_overrides)]
        for job in jobs:
            log.info(f"\t#{job.idx} : {' '.join(filter_overrides(job.overrides))}")
        orig_hydra_cfg = HydraConfig.instance().cfg
        errors: dict[int, str] = {}
        try:
            for pos, job in enumerate(jobs):
                self._prepare_dir(job)
                try:
                    check_scenario_applies(job.task_cfg)
                    validate(job.task_cfg)
                except ConfigError as error:
                    errors[pos] = str(error)
        finally:
            HydraConfig.instance().cfg = orig_hydra_cfg
            configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        plan = plan_batches([j.task_cfg for j in jobs], self.max_agents, [j.idx for j in jobs], errors)
        for line in plan.lines:
            log.info(line)
        results: dict[int, JobReturn] = {}
        for pos, message in errors.items():
            results[pos] = self._job_return(jobs[pos], JobStatus.FAILED, ConfigError(message))
        training = [pos for pos in range(len(jobs)) if pos not in errors]
        progress = SweepProgress([jobs[p].output_dir for p in training],
                                 [int(jobs[p].task_cfg.trainer.total_training_steps) for p in training], started)
        with ProgressPrinter(progress):
            for batch in plan.batches:
                members = [jobs[p] for p in batch]
                for job in members:
                    self._callback(job, "on_job_start", task_function=self.task_function)
                try:
                    train_batch([j.task_cfg for j in members], [j.output_dir for j in members],
                                [OmegaConf.to_container(j.config.hydra.overrides.task) for j in members],
                                num_threads=batch_threads(self.num_threads, len(members)))
                    outcome = [(JobStatus.COMPLETED, objective(j.output_dir, j.task_cfg)) for j in members]
                except Exception as error:  # noqa: BLE001 - recorded per job, as run_job records a task's failure
                    log.error(f"batch of jobs {[j.idx for j in members]} failed: {type(error).__name__}: {error}")
                    outcome = [(JobStatus.FAILED, error)] * len(members)
                for pos, job, (status, value) in zip(batch, members, outcome):
                    results[pos] = self._job_return(job, status, value)
                    self._callback(job, "on_job_end", job_return=results[pos])
            for pos in sorted(plan.solo):
                results[pos] = run_job(hydra_context=self.hydra_context, task_function=self.task_function,
                                       config=jobs[pos].config, job_dir_key="hydra.sweep.dir",
                                       job_subdir_key="hydra.sweep.subdir")
                configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        print_summary(self.config.hydra.sweep.dir, [Path(job.output_dir) for job in jobs], time.time() - started)
        return [results[pos] for pos in range(len(jobs))]
