"""A token task's SFT base, made ready before the trainer starts, and said while it builds.

The bases the tasks' scenarios start from ship with the checkout (`bases/`), so this usually loads a file. Where a
config asks for another base (a bigger model, another SFT recipe), it builds once: the terminal prints its progress and
an estimate, and each run dir's `run.json` carries `{"phase": "sft_base", "base": {step, total, eta_s, ...}}` for the
explorer (the Runs page and the Lab) until the trainer's own `run.json` replaces it. Stopped, the build keeps its
checkpoint (`playground.tasks.sft`) and the next start resumes it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TextIO

from playground.models.tiny_gpt import GPTConfig
from playground.rundir.runs import RUN_INFO, write_json_atomic
from playground.tasks.sft import BaseModel, SFTProgress, build_base_model
from playground.tasks.specs import BaseSpec
from playground.tasks.token_data import PromptSet
from playground.teach.i18n import time_left

SAY_EVERY_S = 15.0  # a terminal line this often (a 15-minute build says about 60)
WRITE_EVERY_S = 2.0  # run.json this often, as the trainer's own


class PreparedBase(NamedTuple):
    """What a token task starts from: its RL prompts, the transformer's config and the SFT base."""

    rl_data: PromptSet
    model_cfg: GPTConfig
    base: BaseModel


def base_model_for(base: BaseSpec, progress: Callable[[SFTProgress], None] | None = None) -> PreparedBase:
    """The task's RL prompts, the model's config and the SFT base model (shipped, or built once and then loaded from
    the cache; `progress` hears a build's steps)."""
    return PreparedBase(base.rl_data, base.model, build_base_model(base.data, base.model, base.sft, progress=progress))


def progress_text(p: SFTProgress) -> str:
    """`step 500/4000 (12%), val accuracy 0.05, ~12 min left`; a build that stops at its target gives its cap and
    the accuracy it stops at (`step 256 of at most 3000, val accuracy 0.12 (stops at 0.30), at most ~3 min left`)."""
    acc = "" if p.val_accuracy is None else f", val accuracy {p.val_accuracy:.2f}"
    left = time_left(p.eta_s(), "en")
    if p.target is None:
        return f"step {p.step}/{p.total} ({100 * p.step / p.total:.0f}%){acc}, {left}"
    return (f"step {p.step} of at most {p.total}{acc} (stops at {p.target:.2f}), "
            f"{'at most ' + left if p.eta_s() is not None else left}")


class BaseReport:
    """Hears a base's build (`SFTProgress`) and says it: a line on the terminal, and `run.json` in each run dir."""

    def __init__(self, task_name: str, run_dirs: Sequence[str | Path], infos: Sequence[Mapping[str, Any]],
                 stream: TextIO | None = None):
        self.task_name, self.run_dirs, self.infos = task_name, [Path(d) for d in run_dirs], list(infos)
        self.stream = stream if stream is not None else sys.stderr
        self.start_time = time.time()
        self.said = self.written = float("-inf")
        self.last: SFTProgress | None = None

    def info(self, info: Mapping[str, Any], status: str = "running", error: str | None = None) -> dict[str, Any]:
        p = self.last
        eta = None if p is None else p.eta_s()
        base = None if p is None else {"step": p.step, "total": p.total, "seconds": round(p.seconds, 1),
                                        "eta_s": None if eta is None else round(eta, 1),
                                        "val_accuracy": p.val_accuracy, "target": p.target}
        return {"status": status, "phase": "sft_base", "base": base, "last_step": 0, "start_time": self.start_time,
                "end_time": time.time() if status != "running" else None, "error": error, "pid": os.getpid(), **info}

    def write(self, status: str = "running", error: str | None = None) -> None:
        for run_dir, info in zip(self.run_dirs, self.infos, strict=True):
            run_dir.mkdir(parents=True, exist_ok=True)
            write_json_atomic(run_dir / RUN_INFO, self.info(info, status, error))
        self.written = time.monotonic()

    def __call__(self, progress: SFTProgress) -> None:
        first = self.last is None
        self.last = progress
        now = time.monotonic()
        if first and progress.step > 1:
            print(f"building the {self.task_name} SFT base: resuming a stopped build after its step "
                  f"{progress.step - 1}", file=self.stream, flush=True)
        elif first:
            print(f"building the {self.task_name} SFT base (once: later runs load it; a stopped build resumes)",
                  file=self.stream, flush=True)
        if first or now - self.written >= WRITE_EVERY_S:
            self.write()
        if now - self.said >= SAY_EVERY_S or progress.step == progress.total:
            print(f"  SFT base: {progress_text(progress)}", file=self.stream, flush=True)
            self.said = now


# What the Runs page lists of a run while its base builds (the trainer's run.json says the rest later).
LISTED = ("task", "family", "scenario", "seed", "total_steps")


def prepare_base(base: BaseSpec, run_dirs: Sequence[str | Path], facts: Sequence[Mapping[str, Any]],
                 infos: Sequence[Mapping[str, Any]]) -> PreparedBase:
    """Load or build the SFT base a run's agents start from (the agents of a batch share it), reporting a build in
    each run dir with what the Runs page lists of its run (`LISTED`, from each agent's run.json `facts`) beside its
    `infos` (how it was launched); the task is then built from it."""
    named = [{**{key: f[key] for key in LISTED}, **info} for f, info in zip(facts, infos, strict=True)]
    report = BaseReport(str(facts[0]["task"]), run_dirs, named)
    try:
        prepared = base_model_for(base, progress=report)
        built = prepared.base
        if report.last is not None:
            print(f"  SFT base ready: {built.steps} steps, val accuracy {built.val_accuracy:.2f}, "
                  f"{built.seconds / 60:.1f} min; kept in {built.path}", file=report.stream, flush=True)
    except KeyboardInterrupt:
        if report.last is not None:
            report.write("interrupted", f"interrupted while building the SFT base at step {report.last.step}/"
                                        f"{report.last.total}: the next start resumes it")
        raise
    return prepared
