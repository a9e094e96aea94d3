"""The per-step record: the step's metrics reduced to one flat record per agent, and each agent's sinks.

A step's metrics arrive as lists of `(K,)` tensors (one per micro-batch, optimizer step or phase, verl's
`append_to_dict`), plus the batch's statistics; they leave the device in one host transfer for all of them, are
reduced with verl's reduction per metric (`metrics.reduce_agent_metrics`), and are split into one plain-float record
per agent, which the agent's `RunLogger` writes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from playground.algos.losses import explained_variance
from playground.algos.masked import masked_stats
from playground.metric_names import (
    ADVANTAGES,
    MFU,
    RETURNS,
    THROUGHPUT,
    TIME_PER_STEP,
    TIMING,
    TIMING_PER_TOKEN,
    TOTAL_NUM_TOKENS,
    VALUES,
    VF_EXPLAINED_VAR,
)
from playground.metrics import LENGTH_BY_CORRECTNESS, PER_TOKEN_PHASES, STEP, reduce_agent_metrics
from playground.rundir.sinks import LogSpec, RunLogger
from playground.step.memory import MemoryGuard
from playground.step.token_records import TokenProbe, TokenRecordSpec, TokenRecordWriter
from playground.tasks.base import Batch, Task


class StepRecorder:
    """Builds each agent's record of a step and writes it to that agent's sinks (`RunLogger`)."""

    def __init__(self, specs: Sequence[LogSpec], run_dirs: Sequence[str | Path], task: Task, facts: dict,
                 extra_infos: Sequence[dict], use_critic: bool, device: torch.device, peak_flops: float,
                 token_records: TokenRecordSpec | None = None):
        """`peak_flops`: the device's peak FLOP/s, for `perf/mfu/*` (inf: MFU reads 0). `token_records`: the
        step's per-token records (`trainer.token_records`, token tasks), None: off."""
        if token_records is not None and task.family != "token":
            raise ValueError(f"trainer.token_records.enable=true is out of range for a {task.family} task: the records "
                             "are a token task's (their responses' tokens)")
        self.num_agents, self.task, self.use_critic, self.device = len(specs), task, use_critic, device
        self.peak_flops = peak_flops
        self.loggers = [RunLogger(s, d, facts, agent=k if self.num_agents > 1 else None, extra=e)
                        for k, (s, d, e) in enumerate(zip(specs, run_dirs, extra_infos, strict=True))]
        self.token_records = None if token_records is None else \
            TokenRecordWriter(token_records, self.loggers, task.token_texts)

    # ---- the sinks ---------------------------------------------------------------------------------------------
    def log(self, agent: int, record: dict[str, float]) -> None:
        self.loggers[agent].log(record)

    def finish(self, agent: int, status: str, error: str | None, stop_reason: str | None = None) -> None:
        self.loggers[agent].finish(status, error, stop_reason=stop_reason)

    def log_samples(self, batch: Batch, step: int, active: Sequence[bool]) -> None:
        """The task's sample rows of this step, for the agents still training (a stopped one has closed its files)."""
        for k, samples in enumerate(self.task.samples(batch, step)):
            if samples and active[k]:
                self.loggers[k].log_samples(samples)

    def log_token_records(self, step: int, batch: Batch, probe: TokenProbe, active: Sequence[bool]) -> None:
        """This step's per-token records (only where `token_records` is on)."""
        if self.token_records is not None:
            self.token_records.write(step, batch, probe, active)

    # ---- the records -------------------------------------------------------------------------------------------
    def validation_records(self, step: int, val: Mapping[str, Tensor]) -> list[dict[str, float]]:
        """A validation-only record per agent (verl's step 0 with `val_before_train`)."""
        return [{STEP: step, **{key: float(v[k]) for key, v in val.items()}} for k in range(self.num_agents)]

    def step_records(self, step: int, batch: Batch, metrics: Mapping[str, list], timing: Mapping[str, float],
                     memory: MemoryGuard) -> list[dict[str, float]]:
        """Reduce everything to one flat record per agent, with one host transfer for the tensors."""
        task, mask, num_agents = self.task, batch["response_mask"], self.num_agents
        data = {**masked_stats(ADVANTAGES, batch["advantages"], mask),
                **masked_stats(RETURNS, batch["returns"], mask)}
        if self.use_critic:
            data.update(masked_stats(VALUES, batch["values"], mask))
            data[VF_EXPLAINED_VAR] = explained_variance(batch["returns"], batch["values"], mask)
        data.update(task.batch_metrics(batch))
        # one host transfer for all metric tables and one for the batch statistics, one reduction per metric for
        # all agents, then plain Python floats per agent
        per_agent = lambda v: torch.as_tensor(v, device=self.device).float().reshape(num_agents)  # noqa: E731
        tables = [torch.stack([per_agent(v) for v in values]) for values in metrics.values()]
        host = np.split(torch.cat(tables).cpu().numpy(), np.cumsum([len(t) for t in tables])[:-1])
        reduced = reduce_agent_metrics(dict(zip(metrics, host)))
        data_cpu = dict(zip(data, torch.stack([per_agent(v) for v in data.values()]).cpu().tolist()))
        task.record_step(batch, step)
        memory_record = memory.metrics()
        tokens = task.token_counts(batch)
        timing_record = {f"{TIMING}/{name}": seconds for name, seconds in timing.items()}
        records = []
        for k in range(num_agents):
            record = {STEP: float(step)}
            record.update({key: values[k] for key, values in reduced.items()})
            record.update({key: values[k] for key, values in data_cpu.items()
                           if not (key in LENGTH_BY_CORRECTNESS and math.isnan(values[k]))})
            record.update(task.agent_metrics(k, step))
            record.update(timing_record)
            for phase in PER_TOKEN_PHASES:
                if phase in timing:
                    divisor = tokens["response"] if phase == "gen" else tokens["total"]
                    record[f"{TIMING_PER_TOKEN}/{phase}"] = 1000 * timing[phase] / max(1, divisor[k])
            record[TOTAL_NUM_TOKENS] = float(tokens["total"][k])
            record[TIME_PER_STEP] = timing["step"]
            record[THROUGHPUT] = tokens["total"][k] / timing["step"]  # one device per run
            record.update(memory_record)
            records.append(record)
        return records

    def add_mfu(self, metrics: dict[str, list], batch: Batch, timing: Mapping[str, float],
                epochs: Mapping[str, int]) -> None:
        """`perf/mfu/<role>` of each update that ran this step: its FLOPs over its seconds and the device's peak."""
        for role, role_epochs in epochs.items():
            seconds = timing.get(f"update_{role}")
            if seconds:
                flops = self.task.update_flops(batch, role, role_epochs)
                metrics[f"{MFU}/{role}"] = [torch.full((self.num_agents,), flops / seconds / self.peak_flops)]
