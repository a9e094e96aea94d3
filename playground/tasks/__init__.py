"""Task families (`base.Task`) and the one place that builds a task from its spec: `build_task`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from playground.tasks.base import Task
from playground.tasks.specs import GymTaskSpec, TokenTaskSpec

if TYPE_CHECKING:
    from playground.tasks.base_build import PreparedBase


def build_task(spec: GymTaskSpec | TokenTaskSpec | None, family: str, device: torch.device,
               prepared_base: PreparedBase | None = None) -> Task:
    """The task of the spec's family, for K agents (each family's module is imported only when used); a token task
    starts from `prepared_base`, its prompts and SFT base made ready at the entry (`base_build.prepare_base`).
    `spec` None: `family` has no spec (`run_spec.TASK_SPECS`), so no task class either."""
    if spec is None:
        raise ValueError(f"task.family={family!r} has no task class: add it (docs/adding-a-task.md), or hand the "
                         "trainer a task")
    if isinstance(spec, GymTaskSpec):
        from playground.tasks.gym_task import GymTask

        return GymTask(spec, device)
    from playground.tasks.token_task import TokenTask

    if prepared_base is None:
        raise ValueError("a token task starts from its SFT base: make it ready first (base_build.prepare_base or "
                         "base_build.base_model_for)")
    return TokenTask(spec, prepared_base, device)
