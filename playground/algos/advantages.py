"""Advantage estimators behind a registry, as verl's `core_algos.py` (v0.7): `algorithm.adv_estimator`.

Every estimator takes keyword arguments (it ignores the ones it does not need) and returns
`(advantages, returns)`, both shaped like `token_level_rewards`: `(bs, response_length)`, or `(K, bs, T)`
for K batched agents. Per-agent hyperparameters (gamma, lam) may be floats or tensors shaped `(K, 1, 1)`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from playground.algos import names
from playground.algos.masked import masked_whiten
from playground.algos.registry import Registry

AdvantageFn = Callable[..., tuple[Tensor, Tensor]]
ADV_ESTIMATORS: Registry[AdvantageFn] = Registry("algorithm.adv_estimator", names.ADV_ESTIMATORS)
register_adv_est = ADV_ESTIMATORS.register
get_adv_estimator_fn = ADV_ESTIMATORS.get


def _per_row(x: float | Tensor) -> float | Tensor:
    """A `(K, 1, 1)` hyperparameter as `(K, 1)`, to broadcast against one time slice `(K, bs)`."""
    return x.squeeze(-1) if isinstance(x, Tensor) else x


@register_adv_est("gae")
@torch.no_grad()
def compute_gae_advantage_return(
    token_level_rewards: Tensor,
    values: Tensor,
    response_mask: Tensor,
    gamma: float | Tensor,
    lam: float | Tensor,
    *,
    next_values: Tensor | None = None,
    dones: Tensor | None = None,
    norm_adv: bool = True,
    **_: object,
) -> tuple[Tensor, Tensor]:
    """Generalised Advantage Estimation (Schulman et al. 2015, arXiv 1506.02438), verl's masked form.

    Backwards over t: `δ_t = r_t + γ·V_next − V_t`, `g_t = δ_t + γλ·g_{t+1}`. In verl's form (no
    `next_values`), V_next is the value of the next *unmasked* token and masked tokens carry both V_next
    and g through unchanged, so nothing bootstraps past the end of a response (the value there is 0).

    Gym rollouts hold several episodes per row and need two more tensors: `next_values[t]` is
    V(s_{t+1}) as the environment produced it (the final observation's value at a time-limit truncation,
    0 at a termination), and `dones[t]` cuts the λ-recursion after an episode's last step.

    Args:
        token_level_rewards: `(bs, T)` reward of each token (outcome reward on the last response token).
        values: `(bs, T)` V(s_t) from the critic before the update.
        response_mask: `(bs, T)` 1 on tokens that are trained on.
        gamma: discount γ. lam: GAE λ.
        next_values: optional `(bs, T)` bootstrap values (gym rollouts).
        dones: optional `(bs, T)` bool, episode ended at t (gym rollouts).
        norm_adv: whiten advantages over the batch (verl always does; the playground can switch it off).

    Returns:
        advantages `(bs, T)` (whitened when `norm_adv`) and returns = raw GAE + values `(bs, T)`.
    """
    num_steps = token_level_rewards.shape[-1]
    advantages = torch.empty_like(token_level_rewards)
    if next_values is not None:
        # Gym form: every step is valid for the recursion; `dones` (not the mask) ends an episode.
        deltas = token_level_rewards + gamma * next_values - values
        discounts = gamma * lam * (~dones if dones is not None else torch.ones_like(deltas, dtype=torch.bool))
        lastgaelam = torch.zeros_like(deltas[..., 0])
        for t in reversed(range(num_steps)):
            lastgaelam = torch.addcmul(deltas[..., t], discounts[..., t], lastgaelam)
            advantages[..., t] = lastgaelam
    else:
        gamma, lam = _per_row(gamma), _per_row(lam)
        mask = response_mask.to(values.dtype)
        nextvalues = torch.zeros_like(values[..., 0])
        lastgaelam = torch.zeros_like(values[..., 0])
        for t in reversed(range(num_steps)):
            delta = token_level_rewards[..., t] + gamma * nextvalues - values[..., t]
            lastgaelam_ = delta + gamma * lam * lastgaelam
            m = mask[..., t]
            nextvalues = values[..., t] * m + (1 - m) * nextvalues
            lastgaelam = lastgaelam_ * m + (1 - m) * lastgaelam
            advantages[..., t] = lastgaelam
    returns = advantages + values
    if norm_adv:
        advantages = masked_whiten(advantages, response_mask)
    return advantages, returns


def _group_stats(scores: Tensor, index: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Per-row group size, mean and unbiased std of `scores` grouped by `index`.

    Args:
        scores: `(*lead, bs)`. index: `(bs,)` int64 group id (verl's `uid`: one per prompt).

    Returns:
        count, mean, std: each `(*lead, bs)`, the statistics of the row's own group.
        A group of one gets mean 0 and std 1, as verl.
    """
    uids, group = torch.unique(index, return_inverse=True)
    zeros = scores.new_zeros(*scores.shape[:-1], len(uids))
    count = torch.bincount(group, minlength=len(uids)).to(scores.dtype)
    mean = zeros.index_add(-1, group, scores) / count
    centered = scores - mean[..., group]
    var = zeros.index_add(-1, group, centered**2) / (count - 1).clamp(min=1)
    single = count[group] == 1
    row_mean = torch.where(single, 0.0, mean[..., group])
    row_std = torch.where(single, 1.0, var[..., group].sqrt())
    return count[group].expand_as(scores), row_mean, row_std


@register_adv_est("grpo")
@torch.no_grad()
def compute_grpo_outcome_advantage(
    token_level_rewards: Tensor,
    response_mask: Tensor,
    index: Tensor,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    **_: object,
) -> tuple[Tensor, Tensor]:
    """GRPO (Shao et al. 2024): each response's score against its prompt group.

    `A_i = (score_i − μ_g) / (σ_g + ε)` with the unbiased group std, or `score_i − μ_g` without the std
    (Dr.GRPO, Liu et al. 2025, arXiv 2503.20783). A group whose scores are all equal gets A = 0.

    Args:
        token_level_rewards: `(bs, T)`; the score of a response is its row sum.
        response_mask: `(bs, T)`.
        index: `(bs,)` int64 prompt id shared by the `rollout.n` samples of one prompt.

    Returns:
        advantages = returns, `(bs, T)`: the response's advantage broadcast over its valid tokens.
    """
    scores = token_level_rewards.sum(dim=-1)
    _, mean, std = _group_stats(scores, index)
    adv = (scores - mean) / (std + epsilon) if norm_adv_by_std_in_grpo else scores - mean
    adv = adv.unsqueeze(-1) * response_mask
    return adv, adv


@register_adv_est("rloo")
@torch.no_grad()
def compute_rloo_outcome_advantage(
    token_level_rewards: Tensor, response_mask: Tensor, index: Tensor, **_: object
) -> tuple[Tensor, Tensor]:
    """RLOO (Ahmadian et al. 2024, arXiv 2402.14740): score minus the mean of the *other* samples.

    `A_i = n/(n−1)·(score_i − μ_g)`; a group of one keeps its raw score.

    Returns:
        advantages = returns, `(bs, T)`.
    """
    scores = token_level_rewards.sum(dim=-1)
    count, mean, _ = _group_stats(scores, index)
    loo = scores * count / (count - 1).clamp(min=1) - mean * count / (count - 1).clamp(min=1)
    adv = torch.where(count > 1, loo, scores).unsqueeze(-1) * response_mask
    return adv, adv


@register_adv_est("reinforce_plus_plus")
@torch.no_grad()
def compute_reinforce_plus_plus_outcome_advantage(
    token_level_rewards: Tensor, response_mask: Tensor, gamma: float | Tensor = 1.0, **_: object
) -> tuple[Tensor, Tensor]:
    """REINFORCE++ (Hu 2025, arXiv 2501.03262): discounted return per token, whitened over the batch.

    `G_t = r_t + γ·G_{t+1}`, reset after the last valid token; `A = masked_whiten(G)·mask`.

    Returns:
        advantages `(bs, T)` and returns G `(bs, T)`.
    """
    gamma = _per_row(gamma)
    mask = response_mask.to(token_level_rewards.dtype)
    returns = torch.empty_like(token_level_rewards)
    running_return = torch.zeros_like(token_level_rewards[..., 0])
    for t in reversed(range(token_level_rewards.shape[-1])):
        running_return = token_level_rewards[..., t] + gamma * running_return
        returns[..., t] = running_return
        running_return = running_return * mask[..., t]
    advantages = masked_whiten(returns, response_mask) * mask
    return advantages, returns
