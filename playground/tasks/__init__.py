"""Task families (`base.Task`) and the one place that builds a task from a config: `build_task`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from omegaconf import DictConfig

from playground.hparams import AgentHParams
from playground.tasks.base import Task

if TYPE_CHECKING:
    from playground.tasks.token_task import PreparedBase


def build_task(cfgs: Sequence[DictConfig], hp: AgentHParams, device: torch.device,
               prepared_base: PreparedBase | None = None) -> Task:
    """The task `task.family` names, for K agents (each family's module is imported only when used); a token task
    starts from `prepared_base` where the caller made it ready (`token_task.PreparedBase`)."""
    family = cfgs[0].task.family
    if family == "gym":
        from playground.tasks.gym_task import GymTask

        return GymTask(list(cfgs), hp, device)
    if family == "token":
        from playground.tasks.token_task import TokenTask

        return TokenTask(list(cfgs), hp, device, prepared_base)
    raise ValueError(f"task.family={family!r} has no task class: add it here (docs/adding-a-task.md)")
