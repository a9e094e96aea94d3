"""Checks a composed config before any compute, and gathers per-agent hyperparameters.

A bad value stops the run with one line naming the key, the value and the allowed range. Keys follow
verl's config tree; the playground-only ones are listed in `PLAYGROUND_KEYS` (and in the README).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from playground.algos.advantages import ADV_ESTIMATORS
from playground.algos.kl import KL_ESTIMATORS
from playground.algos.losses import LOSS_AGG_MODES, POLICY_LOSSES

LOGGERS = ("console", "jsonl", "tensorboard", "wandb")
GROUP_ESTIMATORS = ("grpo", "rloo")

# Knobs verl does not have, named by the playground (the README lists them with their meaning).
PLAYGROUND_KEYS = (
    "task.*", "env.backend", "env.num_envs", "env.rollout_length", "env.eval_episodes", "env.episode_window",
    "algorithm.norm_adv", "reward.scale", "reward.noise_std", "reward.noise_type", "actor_rollout_ref.model.*",
    "world_model.*", "trainer.memory_limit_gb", "trainer.stop_on_finding", "trainer.stop_on_score",
    "trainer.stop_on_score_validated", "trainer.diverge_patience",
    "trainer.num_threads", "trainer.progress_bar", "trainer.samples_per_step", "trainer.mystery",
    "actor_rollout_ref.actor.grad_clip=null (clipping off)", "critic.grad_clip=null",
)

# Hyperparameters that may differ between agents trained together as one batch (`hydra/launcher=batched`).
PER_AGENT_KEYS = (
    "actor_rollout_ref.actor.optim.lr", "actor_rollout_ref.actor.optim.weight_decay",
    "actor_rollout_ref.actor.optim.lr_warmup_steps", "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio",
    "actor_rollout_ref.actor.optim.min_lr_ratio", "actor_rollout_ref.actor.optim.lr_scheduler_type",
    "critic.optim.lr", "critic.optim.weight_decay", "critic.optim.lr_warmup_steps",
    "critic.optim.lr_warmup_steps_ratio", "critic.optim.min_lr_ratio", "critic.optim.lr_scheduler_type",
    "actor_rollout_ref.actor.clip_ratio", "actor_rollout_ref.actor.clip_ratio_low",
    "actor_rollout_ref.actor.clip_ratio_high", "actor_rollout_ref.actor.clip_ratio_c",
    "actor_rollout_ref.actor.entropy_coeff", "actor_rollout_ref.actor.kl_loss_coef",
    "actor_rollout_ref.actor.grad_clip", "critic.grad_clip", "critic.cliprange_value",
    "algorithm.gamma", "algorithm.lam", "algorithm.kl_ctrl.kl_coef", "algorithm.kl_ctrl.target_kl",
    "algorithm.kl_ctrl.horizon", "reward.scale", "reward.noise_std",
    "trainer.seed", "trainer.total_training_steps", "trainer.memory_limit_gb", "trainer.stop_on_finding",
    "trainer.stop_on_score", "trainer.stop_on_score_validated",
    "trainer.experiment_name", "trainer.mystery", "scenario",
)


def uses_critic(cfg: DictConfig) -> bool:
    """verl: a critic trains when `critic.enable` says so, by default exactly when the advantage estimator is GAE."""
    return cfg.critic.enable if cfg.critic.enable is not None else cfg.algorithm.adv_estimator == "gae"


class ConfigError(ValueError):
    """A config value outside its allowed range; the message is one line."""


def _get(cfg: DictConfig, key: str) -> Any:
    return OmegaConf.select(cfg, key, throw_on_missing=False)


def _check(cfg: DictConfig, key: str, ok: Callable[[Any], bool], allowed: str) -> None:
    value = _get(cfg, key)
    try:
        good = ok(value)
    except TypeError:
        good = False
    if not good:
        raise ConfigError(f"{key}={value!r} is out of range: allowed {allowed}")


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _open_unit(x: Any) -> bool:
    return _number(x) and 0 < x < 1


def validate(cfg: DictConfig) -> None:
    """Raise `ConfigError` for the first bad value, before anything is built or trained."""
    family = _get(cfg, "task.family")
    if family not in ("gym", "token"):
        raise ConfigError(f"task.family={family!r} is out of range: allowed 'gym' or 'token'")
    actor = "actor_rollout_ref.actor"
    for key in (f"{actor}.optim.lr", "critic.optim.lr"):
        _check(cfg, key, lambda x: _number(x) and x > 0, "> 0")
    _check(cfg, f"{actor}.clip_ratio", _open_unit, "in (0, 1)")
    for key in (f"{actor}.clip_ratio_low", f"{actor}.clip_ratio_high"):
        _check(cfg, key, lambda x: x is None or _open_unit(x), "null or in (0, 1)")
    _check(cfg, f"{actor}.clip_ratio_c", lambda x: _number(x) and x > 1, "> 1 (dual-clip lower bound)")
    _check(cfg, f"{actor}.entropy_coeff", _number, "a finite number")
    for key in ("algorithm.gamma", "algorithm.lam"):
        _check(cfg, key, lambda x: _number(x) and 0 <= x <= 1, "in [0, 1]")
    for key in (f"{actor}.grad_clip", "critic.grad_clip"):
        _check(cfg, key, lambda x: x is None or (_number(x) and x > 0), "null (off) or > 0")
    for key in (f"{actor}.ppo_epochs", "critic.ppo_epochs", "trainer.total_training_steps"):
        _check(cfg, key, lambda x: isinstance(x, int) and x >= 1, "an integer >= 1")
    _check(cfg, "critic.cliprange_value", lambda x: _number(x) and x > 0, "> 0")
    for key in (f"{actor}.loss_agg_mode", "critic.loss_agg_mode"):
        _check(cfg, key, lambda x: x in LOSS_AGG_MODES, f"one of {list(LOSS_AGG_MODES)}")
    _check(cfg, "algorithm.adv_estimator", lambda x: x in ADV_ESTIMATORS, f"one of {list(ADV_ESTIMATORS)}")
    _check(cfg, f"{actor}.policy_loss.loss_mode", lambda x: x in POLICY_LOSSES, f"one of {list(POLICY_LOSSES)}")
    kl_types = f"one of {list(KL_ESTIMATORS)} (optionally with '+')"
    for key in (f"{actor}.kl_loss_type", "algorithm.kl_penalty"):
        _check(cfg, key, lambda x: isinstance(x, str) and x.rstrip("+") in KL_ESTIMATORS, kl_types)
    _check(cfg, "algorithm.kl_ctrl.type", lambda x: x in ("fixed", "adaptive"), "'fixed' or 'adaptive'")
    _check(cfg, "algorithm.kl_ctrl.horizon", lambda x: _number(x) and x > 0, "> 0")
    for opt in (f"{actor}.optim", "critic.optim"):
        _check(cfg, f"{opt}.lr_scheduler_type", lambda x: x in ("constant", "cosine"), "'constant' or 'cosine'")
        _check(cfg, f"{opt}.min_lr_ratio", lambda x: _number(x) and 0 <= x <= 1, "in [0, 1]")
    _check(cfg, "trainer.critic_warmup", lambda x: isinstance(x, int) and x >= 0, "an integer >= 0")
    _check(cfg, "trainer.memory_limit_gb", lambda x: x is None or (_number(x) and x > 0), "null or > 0")
    _check(cfg, "trainer.stop_on_score", lambda x: x is None or _number(x), "null or a number")
    _check(cfg, "trainer.stop_on_score_validated", lambda x: isinstance(x, bool), "true or false")
    _check(cfg, "trainer.device", _device_ok, "'auto', 'cpu', or 'cuda[:N]' with CUDA present")
    loggers = _get(cfg, "trainer.logger")
    loggers = [loggers] if isinstance(loggers, str) else list(loggers or [])
    for name in loggers:
        if name not in LOGGERS:
            raise ConfigError(f"trainer.logger contains {name!r}: allowed {list(LOGGERS)}")
    finding = _get(cfg, "trainer.stop_on_finding")
    if finding is not None:
        from playground.diagnose.catalogue import FAILURE_IDS

        if finding not in FAILURE_IDS:
            raise ConfigError(f"trainer.stop_on_finding={finding!r} is out of range: allowed one of {FAILURE_IDS}")
    (_validate_gym if family == "gym" else _validate_token)(cfg)


def _device_ok(x: Any) -> bool:
    if x in ("auto", "cpu"):
        return True
    return isinstance(x, str) and x.startswith("cuda") and torch.cuda.is_available()


def _check_minibatches(cfg: DictConfig, batch: int, unit: str, per_unit: int = 1) -> None:
    for role in ("actor_rollout_ref.actor", "critic"):
        mini = _get(cfg, f"{role}.ppo_mini_batch_size")
        if not (isinstance(mini, int) and mini >= 1 and batch % mini == 0):
            raise ConfigError(f"{role}.ppo_mini_batch_size={mini!r} is out of range: must divide the batch of "
                              f"{batch} {unit} into whole mini-batches")
        micro = _get(cfg, f"{role}.ppo_micro_batch_size_per_gpu")
        rows = mini * per_unit  # verl: the mini-batch counts prompts, the micro-batch sequences
        if micro is not None and not (isinstance(micro, int) and micro >= 1 and rows % micro == 0):
            raise ConfigError(f"{role}.ppo_micro_batch_size_per_gpu={micro!r} is out of range: must be null "
                              f"or divide the mini-batch of {rows} {unit if per_unit == 1 else 'sequences'}")


def _validate_gym(cfg: DictConfig) -> None:
    for key in ("env.num_envs", "env.rollout_length", "env.eval_episodes", "env.episode_window"):
        _check(cfg, key, lambda x: isinstance(x, int) and x >= 1, "an integer >= 1")
    _check(cfg, "env.backend", lambda x: x in ("auto", "torch", "gymnasium"), "'auto', 'torch' or 'gymnasium'")
    if _get(cfg, "algorithm.adv_estimator") != "gae":
        raise ConfigError(f"algorithm.adv_estimator={_get(cfg, 'algorithm.adv_estimator')!r} is out of range for "
                          "gym tasks: allowed 'gae' (the group estimators need several samples per prompt)")
    _check_minibatches(cfg, _get(cfg, "env.num_envs") * _get(cfg, "env.rollout_length"), "transitions")


def _validate_token(cfg: DictConfig) -> None:
    from playground.tasks.token_data import TASKS

    _check(cfg, "task.name", lambda x: x in TASKS, f"one of {sorted(TASKS)}")
    _check(cfg, "data.max_response_length", lambda x: isinstance(x, int) and x >= 1, "an integer >= 1")
    _check(cfg, "data.max_prompt_length", lambda x: isinstance(x, int) and x >= 2, "an integer >= 2")
    _check(cfg, "data.train_batch_size", lambda x: isinstance(x, int) and x >= 1, "an integer >= 1")
    context = _get(cfg, "actor_rollout_ref.model.block_size")
    need = _get(cfg, "data.max_prompt_length") + _get(cfg, "data.max_response_length")
    if need > context:
        raise ConfigError(f"data.max_prompt_length + data.max_response_length = {need} is out of range: the "
                          f"model's context (actor_rollout_ref.model.block_size) holds {context} tokens")
    n = _get(cfg, "actor_rollout_ref.rollout.n")
    _check(cfg, "actor_rollout_ref.rollout.n", lambda x: isinstance(x, int) and x >= 1, "an integer >= 1")
    estimator = _get(cfg, "algorithm.adv_estimator")
    if estimator in GROUP_ESTIMATORS and n < 2:
        raise ConfigError(f"actor_rollout_ref.rollout.n={n} is out of range for algorithm.adv_estimator="
                          f"{estimator}: allowed >= 2 (a group of one has no baseline)")
    _check(cfg, "actor_rollout_ref.rollout.temperature", lambda x: _number(x) and x > 0, "> 0")
    _check(cfg, "actor_rollout_ref.rollout.top_p", lambda x: _number(x) and 0 < x <= 1, "in (0, 1]")
    _check(cfg, "actor_rollout_ref.rollout.val_kwargs.n", lambda x: isinstance(x, int) and x >= 1, "an integer >= 1")
    _check(cfg, "reward.name", lambda x: x in ("exact_match",), "'exact_match'")
    if _get(cfg, "world_model.enable"):
        raise ConfigError("world_model.enable=True is out of range for token tasks: allowed only on gym tasks")
    _check_minibatches(cfg, _get(cfg, "data.train_batch_size"), "prompts", per_unit=n)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


class AgentHParams:
    """Per-agent hyperparameters of K configs as `(K,)` tensors (`view3` gives `(K, 1, 1)`)."""

    def __init__(self, cfgs: Sequence[DictConfig], device: torch.device):
        self.cfgs = list(cfgs)
        self.device = device
        self._cache: dict[tuple, torch.Tensor] = {}  # configs do not change during a run

    def vector(self, key: str, none_as: float | None = None, fallback: str | None = None) -> torch.Tensor:
        """`(K,)` values of `key`; a null value becomes `none_as`, or the value of the `fallback` key."""
        cached = self._cache.get((key, none_as, fallback))
        if cached is not None:
            return cached
        values = []
        for cfg in self.cfgs:
            value = _get(cfg, key)
            if value is None:
                value = _get(cfg, fallback) if fallback is not None else none_as
            if value is None:
                raise ConfigError(f"{key} is null and has no default")
            values.append(float(value))
        vector = torch.tensor(values, dtype=torch.float32, device=self.device)
        self._cache[(key, none_as, fallback)] = vector
        return vector

    def view3(self, key: str, **kw) -> torch.Tensor:
        return self.vector(key, **kw).view(-1, 1, 1)


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            out.update(_flatten(value, f"{prefix}{key}."))
        return out if out or not prefix else {prefix[:-1]: {}}
    return {prefix[:-1]: node}


def leaf_values(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config as `dotted.key -> value` (lists stay whole), without the `hydra` node."""
    plain = OmegaConf.to_container(cfg, resolve=True)
    plain.pop("hydra", None)
    return _flatten(plain)


def structural_values(leaves: dict[str, Any]) -> dict[str, Any]:
    """The flattened config without `PER_AGENT_KEYS`: what must be equal for agents to share a batch."""
    return {k: v for k, v in leaves.items() if k not in PER_AGENT_KEYS}


def batch_signature(cfg: DictConfig, leaves: dict[str, Any] | None = None) -> str:
    """The part of a config that fixes tensor shapes: configs with equal signatures can train as one batch.

    `leaves`: the config's `leaf_values`, when the caller has them already.
    """
    return repr(sorted(structural_values(leaf_values(cfg) if leaves is None else leaves).items()))
