"""Every token task's prompt set by `task.name`, built from a config's `task` section.

A module of its own because countdown's prompt set builds on `token_data` (its tokenizer and `PromptSet`): the
registry that names both sits above them.
"""

from __future__ import annotations

from typing import Any

from playground.config import ConfigError
from playground.tasks import token_data
from playground.tasks.agent_loop import is_multi_turn
from playground.tasks.calc_data import CalcPrompts
from playground.tasks.countdown_data import CountdownPrompts
from playground.tasks.frozenlake_data import FrozenLakePrompts
from playground.tasks.token_data import PromptSet

# multi-turn prompt sets (`episodes.py`): calc, frozenlake
PROMPT_SETS: dict[str, type[PromptSet]] = {**token_data.PROMPT_SETS, "countdown": CountdownPrompts,
                                           "calc": CalcPrompts, "frozenlake": FrozenLakePrompts}


def prompts_for_task(task: Any) -> PromptSet:
    """The prompt set of a config's `task` section: `task.name`, its knobs, `task.num_val`, `task.data_seed`.

    Raises:
        ConfigError: an unknown name, or knobs out of range (checked before any model is built).
    """
    if task.name not in PROMPT_SETS:
        raise ConfigError(f"task.name={task.name!r} is out of range for token tasks: allowed one of "
                          f"{sorted(PROMPT_SETS)}")
    cls = PROMPT_SETS[task.name]
    try:
        return cls(**{key: task[key] for key in cls.knobs}, num_val=task.num_val, seed=task.data_seed)
    except ValueError as error:  # each prompt set checks its own knobs' ranges and says which and what it got
        keys = ", ".join(f"task.{key}" for key in (*cls.knobs, "num_val"))
        raise ConfigError(f"task {task.name}'s knobs are out of range ({keys}): {error}") from error


def check_multi_turn(cfg: Any) -> None:
    """`actor_rollout_ref.rollout.multi_turn.enable` is on exactly for a multi-turn task, whose episodes' outcome is the
    score (so the text rule's `reward.format_score` and `reward.partial_credit` stay off). Checked before the base is
    built (here, not in `config.validate`: the config module sits below the tasks).

    Raises:
        ConfigError: the first key out of range.
    """
    name = cfg.task.name
    multi = name in PROMPT_SETS and is_multi_turn(PROMPT_SETS[name])
    enable = cfg.actor_rollout_ref.rollout.multi_turn.enable
    if bool(enable) != multi:
        why = "a multi-turn task: its environment replies between turns" if multi else "a single-turn task: no reply"
        raise ConfigError(f"actor_rollout_ref.rollout.multi_turn.enable={enable!r} is out of range: allowed "
                          f"{str(multi).lower()} for task.name={name} ({why})")
    if multi and (cfg.reward.format_score != 0 or cfg.reward.partial_credit):
        raise ConfigError(f"reward.format_score={cfg.reward.format_score!r}, reward.partial_credit="
                          f"{cfg.reward.partial_credit!r} are out of range for task {name}: allowed 0 and false (its "
                          "episodes' outcome is the score)")
