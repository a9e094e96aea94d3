"""The `adv` phase, as verl's trainer computes it: the reward trained on (`token_level_rewards`, with the in-reward KL
penalty when `algorithm.use_kl_in_reward`), then the registered advantage estimator over the task's layout of the
rows. Functions of the batch and the settings: the step and dynamic sampling call them, nothing calls back.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from playground.algos.advantages import ADV_ESTIMATORS, get_adv_estimator_fn
from playground.algos.kl import get_kl_controller, kl_penalty
from playground.algos.masked import masked_mean
from playground.metric_names import REWARD_KL_PENALTY, REWARD_KL_PENALTY_COEFF
from playground.step.hparams import KLControlSpec, StepHParams
from playground.tasks.base import Batch, Task


class KLInReward:
    """verl's `apply_kl_penalty` with its KL controller (`algorithm.kl_ctrl.*`), per agent."""

    def __init__(self, kl_ctrl: KLControlSpec, penalty: str, num_agents: int, device: torch.device):
        self.controller = get_kl_controller(kl_ctrl.type, kl_ctrl.kl_coef, kl_ctrl.target_kl, kl_ctrl.horizon)
        self.penalty, self.num_agents, self.device = penalty, num_agents, device

    def penalised(self, batch: Batch, agents: Sequence[int] | None = None) -> tuple[Tensor, Tensor]:
        """`token_level_scores − β·KL(old ‖ ref)` per token, with β from the controller before its update, for the
        batch's rows of `agents` (None: all); returns the rewards and the masked per-token KL."""
        kld = kl_penalty(batch["old_log_probs"], batch["ref_log_prob"], self.penalty) * batch["response_mask"]
        beta = self.controller.value.to(self.device).expand(self.num_agents)
        beta = beta if agents is None else beta[list(agents)]
        return batch["token_level_scores"] - beta.reshape(-1, 1, 1) * kld, kld

    def apply(self, batch: Batch) -> dict[str, list[Tensor]]:
        """Fill the step's `token_level_rewards`, log the penalty and update the controller (once per step)."""
        mask = batch["response_mask"]
        batch["token_level_rewards"], kld = self.penalised(batch)
        beta = self.controller.value.to(self.device)
        seq_kl = masked_mean(kld, mask, dim=-1)  # per-sequence token mean, then mean over sequences
        current_kl = seq_kl.mean(dim=-1)
        self.controller.update(current_kl, n_steps=mask.shape[1])
        return {REWARD_KL_PENALTY: [current_kl],
                REWARD_KL_PENALTY_COEFF: [beta.expand(self.num_agents)]}


class AdvantageEstimator:
    """The registered estimator `algorithm.adv_estimator`, given only the keywords it reads."""

    def __init__(self, hp: StepHParams):
        self.name, self.fn = hp.adv_estimator, get_adv_estimator_fn(hp.adv_estimator)
        self.settings = {"gamma": hp.gamma, "lam": hp.lam, "norm_adv": hp.norm_adv,
                         "norm_adv_by_std_in_grpo": hp.norm_adv_by_std_in_grpo}

    def __call__(self, batch: Batch, task: Task) -> None:
        """Fill `advantages` and `returns` from `token_level_rewards`, in the task's layout of the rows."""
        inputs = {**task.advantage_inputs(batch), **self.settings}
        adv, ret = self.fn(**ADV_ESTIMATORS.select(self.name, inputs))
        batch["advantages"], batch["returns"] = task.advantage_rows(adv), task.advantage_rows(ret)


def compute_advantage(batch: Batch, task: Task, estimator: AdvantageEstimator,
                      kl_in_reward: KLInReward | None) -> dict[str, list[Tensor]]:
    """The `adv` phase: the reward trained on, then advantages and returns; returns the in-reward KL's metrics."""
    metrics = {}
    if kl_in_reward is not None:
        metrics = kl_in_reward.apply(batch)
    else:
        batch["token_level_rewards"] = batch["token_level_scores"]
    estimator(batch, task)
    return metrics
