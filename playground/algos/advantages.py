"""Advantage estimators behind a registry, as verl's `core_algos.py` (v0.7): `algorithm.adv_estimator`.

Every estimator takes keyword arguments, only those it reads (`ADV_ESTIMATORS.select` picks them from what the
caller has: `ESTIMATOR_KEYWORDS`; a misspelt keyword is a `TypeError`), and returns
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
# What an estimator may read: the batch's fields in the task's layout, `algorithm.*` values, and its own constants.
ESTIMATOR_KEYWORDS = ("token_level_rewards", "values", "response_mask", "next_values", "dones", "index",
                      "reward_baselines", "gamma", "lam", "norm_adv", "norm_adv_by_std_in_grpo", "epsilon", "f_norm")
ADV_ESTIMATORS: Registry[AdvantageFn] = Registry("algorithm.adv_estimator", names.ADV_ESTIMATORS, ESTIMATOR_KEYWORDS)
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


def group_row_stats(scores: Tensor, index: Tensor) -> tuple[Tensor, Tensor, Tensor]:
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
    _, mean, std = group_row_stats(scores, index)
    adv = (scores - mean) / (std + epsilon) if norm_adv_by_std_in_grpo else scores - mean
    adv = adv.unsqueeze(-1) * response_mask
    return adv, adv


@register_adv_est("rloo")
@torch.no_grad()
def compute_rloo_outcome_advantage(
    token_level_rewards: Tensor, response_mask: Tensor, index: Tensor
) -> tuple[Tensor, Tensor]:
    """RLOO (Ahmadian et al. 2024, arXiv 2402.14740): score minus the mean of the *other* samples.

    `A_i = n/(n−1)·(score_i − μ_g)`; a group of one keeps its raw score.

    Returns:
        advantages = returns, `(bs, T)`.
    """
    scores = token_level_rewards.sum(dim=-1)
    count, mean, _ = group_row_stats(scores, index)
    loo = scores * count / (count - 1).clamp(min=1) - mean * count / (count - 1).clamp(min=1)
    adv = torch.where(count > 1, loo, scores).unsqueeze(-1) * response_mask
    return adv, adv


@register_adv_est("reinforce_plus_plus")
@torch.no_grad()
def compute_reinforce_plus_plus_outcome_advantage(
    token_level_rewards: Tensor, response_mask: Tensor, gamma: float | Tensor = 1.0
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


def _group_sum(values: Tensor, index: Tensor) -> Tensor:
    """Per row, the sum of `values (*lead, bs)` over the row's group (rows sharing `index`)."""
    _, group = torch.unique(index, return_inverse=True)
    sums = values.new_zeros(*values.shape[:-1], int(group.max()) + 1).index_add(-1, group, values)
    return sums[..., group]


@register_adv_est("reinforce_plus_plus_baseline")
@torch.no_grad()
def compute_reinforce_plus_plus_baseline_outcome_advantage(
    token_level_rewards: Tensor, response_mask: Tensor, index: Tensor
) -> tuple[Tensor, Tensor]:
    """REINFORCE++-baseline (Hu 2025, arXiv 2501.03262): verl's
    `compute_reinforce_plus_plus_baseline_outcome_advantage`.

    The score minus its group's mean (a group of one keeps its score: mean 0), broadcast over the response,
    then whitened over the whole batch's valid tokens: `A = masked_whiten((score − μ_g)·mask)·mask`.

    Returns:
        advantages = returns, `(bs, T)`.
    """
    scores = token_level_rewards.sum(dim=-1)
    _, mean, _ = group_row_stats(scores, index)
    adv = (scores - mean).unsqueeze(-1) * response_mask
    adv = masked_whiten(adv, response_mask) * response_mask
    return adv, adv


@register_adv_est("remax")
@torch.no_grad()
def compute_remax_outcome_advantage(
    token_level_rewards: Tensor, response_mask: Tensor, reward_baselines: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """ReMax (Li et al. 2023, arXiv 2310.10505): verl's `compute_remax_outcome_advantage`.

    Returns are the reverse cumulative sum of the masked rewards, `G_t = Σ_{t' ≥ t} r_t'·m_t'`, and the
    baseline is the reward of the greedy response to the same prompt: `A_t = G_t − b·m_t`. Not whitened.

    Args:
        reward_baselines: `(bs,)` (or `(K, bs)`) reward of the greedy (do_sample=False) response per row.

    Returns:
        advantages `(bs, T)` and returns G `(bs, T)`.
    """
    if reward_baselines is None:
        raise ValueError("remax needs reward_baselines: the greedy response's reward, one per row")
    returns = (token_level_rewards * response_mask).flip(dims=[-1]).cumsum(dim=-1).flip(dims=[-1])
    advantages = returns - reward_baselines.unsqueeze(-1) * response_mask
    return advantages, returns


@register_adv_est("opo")
@torch.no_grad()
def compute_opo_outcome_advantage(
    token_level_rewards: Tensor, response_mask: Tensor, index: Tensor
) -> tuple[Tensor, Tensor]:
    """OPO (Hao et al. 2025, "On-Policy RL with Optimal Reward Baseline", arXiv 2505.23585): verl's
    `compute_opo_outcome_advantage`.

    The baseline is the group's length-weighted mean score, `b_g = Σ_j |o_j|·score_j / Σ_j |o_j|` with |o| the
    number of valid tokens; `A_i = score_i − b_g`. A group of one gets b = 0.

    Returns:
        advantages = returns, `(bs, T)`.
    """
    scores = token_level_rewards.sum(dim=-1)
    lengths = response_mask.sum(dim=-1).to(scores.dtype)
    count, _, _ = group_row_stats(scores, index)
    baseline = _group_sum(lengths * scores, index) / _group_sum(lengths, index)
    adv = scores - torch.where(count > 1, baseline, 0.0)
    adv = adv.unsqueeze(-1) * response_mask
    return adv, adv


@register_adv_est("gpg")
@torch.no_grad()
def compute_gpg_outcome_advantage(
    token_level_rewards: Tensor, response_mask: Tensor, index: Tensor, f_norm: float | Tensor = 1.0
) -> tuple[Tensor, Tensor]:
    """GPG (Chu et al. 2025, arXiv 2504.02546): verl's `compute_gpg_outcome_advantage`.

    `A_i = α·(score_i − μ_g) / f_norm` with `α = bs / max(#rows with a nonzero score, 1)` over the whole batch
    (per agent): the batch is rescaled as if only the rows that earned a reward counted. No std division. A
    group of one gets μ = 0.

    Args:
        f_norm: divisor, a float or `(K, 1, 1)` (verl's default 1.0; its `alpha` argument is overwritten).

    Returns:
        advantages = returns, `(bs, T)`.
    """
    scores = token_level_rewards.sum(dim=-1)
    nonzero = torch.count_nonzero(scores, dim=-1).clamp(min=1).unsqueeze(-1)
    alpha = scores.shape[-1] / nonzero
    _, mean, _ = group_row_stats(scores, index)
    adv = alpha * (scores - mean) / _per_row(f_norm)
    adv = adv.unsqueeze(-1) * response_mask
    return adv, adv


@register_adv_est("grpo_passk")
@torch.no_grad()
def compute_grpo_passk_outcome_advantage(
    token_level_rewards: Tensor,
    response_mask: Tensor,
    index: Tensor,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
) -> tuple[Tensor, Tensor]:
    """GRPO for pass@k (arXiv 2503.19595, as verl cites it): verl's `compute_grpo_passk_outcome_advantage`.

    Only the best response of each group gets an advantage, `r_max − r_2nd` (the margin over the runner-up),
    divided by `σ_g + ε` (unbiased group std) when `norm_adv_by_std_in_grpo`; every other response gets 0, and
    a tie for the best gives 0 too. The first of several equal best rows is the one credited.

    Raises:
        ValueError: a group has fewer than two responses (as verl).

    Returns:
        advantages = returns, `(bs, T)`.
    """
    scores = token_level_rewards.sum(dim=-1)
    count, _, std = group_row_stats(scores, index)
    if bool((count < 2).any()):
        raise ValueError("grpo_passk needs at least 2 responses per group (actor_rollout_ref.rollout.n >= 2)")
    _, group = torch.unique(index, return_inverse=True)
    groups, rows = int(group.max()) + 1, scores.shape[-1]
    by_group = group.expand_as(scores)
    best = scores.new_full((*scores.shape[:-1], groups), -torch.inf).scatter_reduce(-1, by_group, scores, "amax")
    row = torch.arange(rows, device=scores.device).expand_as(scores)
    at_best = torch.where(scores == best[..., group], row, rows)
    first_best = torch.full_like(best, rows, dtype=torch.long).scatter_reduce(-1, by_group, at_best, "amin")
    is_best = row == first_best[..., group]
    runner_up = torch.full_like(best, -torch.inf).scatter_reduce(
        -1, by_group, torch.where(is_best, -torch.inf, scores), "amax")
    margin = best[..., group] - runner_up[..., group]
    if norm_adv_by_std_in_grpo:
        margin = margin / (std + epsilon)
    adv = torch.where(is_best, margin, 0.0).unsqueeze(-1) * response_mask
    return adv, adv
