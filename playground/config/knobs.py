"""The knobs: the config keys the metrics guide talks about, one table for the explorer's Lab (the fields it shows,
`LAB_KNOBS`) and for the diagnosis' replay (the keys a scenario is compared with a log on, `REPLAY_KNOBS`).

Data only, and torch-free: the explorer imports it. A knob's value in a config is `knob_value`'s, which resolves a clip
bound left null the one way the trainer does (`playground.algos.clip_range.resolve_clip_range`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from playground.algos.clip_range import resolve_clip_range
from playground.algos.names import ADV_ESTIMATORS

ACTOR = "actor_rollout_ref.actor"
CLIP_RATIO = f"{ACTOR}.clip_ratio"  # ε; each bound below left null means it
CLIP_RATIO_LOW = f"{ACTOR}.clip_ratio_low"
CLIP_RATIO_HIGH = f"{ACTOR}.clip_ratio_high"


@dataclass(frozen=True)
class Knob:
    """One knob: a config key, how it is typed, and when it applies."""

    name: str  # the Lab's widget key (`knob_<name>`) and its label's string key; the replay's row name
    key: str  # the config key, as an override names it
    kind: str  # float | int | bool | choice
    step: float = 1.0  # the Lab's number field's +/- step
    family: str = ""  # "token": only token tasks have it; "": every task
    options: tuple[str, ...] = ()  # a choice's values
    needs: str | None = None  # "critic": only when a critic trains; another knob's name: only when that one is on

    @property
    def fallback(self) -> str | None:
        """The key whose value a null means (verl: clip_ratio_low/high -> clip_ratio); None for every other knob."""
        return CLIP_RATIO if self.key in (CLIP_RATIO_LOW, CLIP_RATIO_HIGH) else None


KNOBS: tuple[Knob, ...] = (
    Knob("actor_lr", f"{ACTOR}.optim.lr", "float", step=1e-4),
    Knob("critic_lr", "critic.optim.lr", "float", step=1e-4, needs="critic"),
    # verl's default is constant; the tasks anneal (cosine), which hides a high lr late in a short run
    Knob("lr_schedule", f"{ACTOR}.optim.lr_scheduler_type", "choice", options=("constant", "cosine")),
    Knob("entropy_coeff", f"{ACTOR}.entropy_coeff", "float", step=0.01),
    Knob("clip_low", CLIP_RATIO_LOW, "float", step=0.05),
    Knob("clip_high", CLIP_RATIO_HIGH, "float", step=0.05),
    Knob("ppo_epochs", f"{ACTOR}.ppo_epochs", "int"),
    Knob("mini_batch", f"{ACTOR}.ppo_mini_batch_size", "int"),
    Knob("use_kl_loss", f"{ACTOR}.use_kl_loss", "bool"),
    Knob("kl_loss_coef", f"{ACTOR}.kl_loss_coef", "float", step=1e-3, needs="use_kl_loss"),
    Knob("rollout_n", "actor_rollout_ref.rollout.n", "int", family="token"),
    Knob("temperature", "actor_rollout_ref.rollout.temperature", "float", step=0.1, family="token"),
    # the rollout is not the trainer: its precision and how many updates its weights lag (issue 23)
    Knob("rollout_dtype", "actor_rollout_ref.rollout.dtype", "choice", family="token",
         options=("float32", "bfloat16", "float16")),
    Knob("rollout_staleness", "actor_rollout_ref.rollout.staleness", "int", family="token"),
    Knob("steps", "trainer.total_training_steps", "int"),
    Knob("seed", "trainer.seed", "int"),
    # the replay's alone: what a log shows of a run's config (a critic's loss, the KL in the reward, the lengths' caps)
    Knob("estimator", "algorithm.adv_estimator", "choice", options=ADV_ESTIMATORS),
    Knob("kl_in_reward_coef", "algorithm.kl_ctrl.kl_coef", "float"),
    Knob("prompt_cap", "data.max_prompt_length", "int", family="token"),
    Knob("response_cap", "data.max_response_length", "int", family="token"),
)
BY_NAME = {k.name: k for k in KNOBS}
# The Lab's fields, in the order it shows them
LAB_KNOBS = tuple(BY_NAME[n] for n in ("actor_lr", "critic_lr", "lr_schedule", "entropy_coeff", "clip_low",
                                       "clip_high", "ppo_epochs", "mini_batch", "use_kl_loss", "kl_loss_coef",
                                       "rollout_n", "temperature", "rollout_dtype", "rollout_staleness", "steps",
                                       "seed"))
# The knobs a scenario is shown by in a replay, and compared on where the log shows them, in the replay's order (its
# reference file's): kl_loss_coef and kl_in_reward_coef are the coefficients in effect (0 when their switch is off);
# the caps are matched by the log's longest prompt and response reaching them
REPLAY_KNOBS = tuple(BY_NAME[n] for n in ("actor_lr", "critic_lr", "clip_low", "clip_high", "entropy_coeff",
                                          "estimator", "kl_loss_coef", "kl_in_reward_coef", "prompt_cap",
                                          "response_cap"))


def knob_value(knob: Knob, get: Callable[[str], Any]) -> Any:
    """The knob's value in a config, `get` reading a key (None where it is null or absent): a clip bound left null is
    `clip_ratio`'s value (`resolve_clip_range`)."""
    if knob.fallback is None:
        return get(knob.key)
    low, high = resolve_clip_range(get(CLIP_RATIO), get(CLIP_RATIO_LOW), get(CLIP_RATIO_HIGH))
    return low if knob.key == CLIP_RATIO_LOW else high
