"""Every token task's prompt set by `task.name`, built from a config's `task` section.

A module of its own because countdown's prompt set builds on `token_data` (its tokenizer and `PromptSet`): the
registry that names both sits above them.
"""

from __future__ import annotations

from typing import Any

from playground.config import ConfigError
from playground.tasks import token_data
from playground.tasks.countdown_data import CountdownPrompts
from playground.tasks.token_data import PromptSet

PROMPT_SETS: dict[str, type[PromptSet]] = {**token_data.PROMPT_SETS, "countdown": CountdownPrompts}


def prompts_for_task(task: Any) -> PromptSet:
    """The prompt set of a config's `task` section: `task.name`, its knobs, `task.num_val`, `task.data_seed`.

    Raises:
        ConfigError: an unknown name (checked before any model is built).
    """
    if task.name not in PROMPT_SETS:
        raise ConfigError(f"task.name={task.name!r} is out of range for token tasks: allowed one of "
                          f"{sorted(PROMPT_SETS)}")
    cls = PROMPT_SETS[task.name]
    return cls(**{key: task[key] for key in cls.knobs}, num_val=task.num_val, seed=task.data_seed)
