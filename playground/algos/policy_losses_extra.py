"""More policy losses behind `actor_rollout_ref.actor.policy_loss.loss_mode`, as verl's `core_algos.py` (v0.7).

`gspo`, `gpg`, `clip_cov`, `kl_cov`, `geo_mean`. Same calling convention as `compute_policy_loss_vanilla`:
`(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode)` positionally, then the config as keyword
arguments under verl's key names (`clip_ratio*` from `actor.*`, `clip_cov_*`, `kl_cov_ratio`, `ppo_kl_coef`
from `actor.policy_loss.*`) with verl's defaults, only the keys it reads (`POLICY_LOSSES.select` picks them).
Coefficients may be floats or `(K, 1, 1)` tensors; the per-token inputs are `(bs, T)` or `(K, bs, T)`, and every
reduction (means, covariances, top-k shares) is per agent.

Each loss returns the metric keys verl's version returns, no more: `gpg` none, `kl_cov` only `actor/ppo_kl`,
`clip_cov` no `actor/pg_clipfrac_lower`.

`playground.algos.losses` imports this module (this one imports `aggregate`, `clip_range`, `masked` and
`policy_registry`, never `losses`), so importing `losses` fills the registry.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from playground.algos.aggregate import agg_loss
from playground.algos.clip_range import resolve_clip_range
from playground.algos.masked import TOKEN_DIMS, masked_mean, masked_sum
from playground.algos.policy_registry import register_policy_loss
from playground.metric_names import PG_CLIPFRAC, PG_CLIPFRAC_LOWER, PPO_KL

Generators = torch.Generator | Sequence[torch.Generator] | None


def _per_agent(x: float | Tensor, like: Tensor) -> Tensor:
    """A float or `(K, 1, 1)` coefficient as a float64 tensor shaped like `like`'s leading dims `(K,)` (or `()`)."""
    lead = like.shape[:-2]
    t = torch.as_tensor(x, dtype=torch.float64, device=like.device)
    return t.reshape(()).expand(lead) if t.numel() == 1 else t.reshape(lead)


def _share_count(ratio: float | Tensor, response_mask: Tensor) -> Tensor:
    """verl's `max(int(ratio · n_valid), 1)` tokens, per agent, in float64.

    A float32 ratio is nudged up by one float32 epsilon first, so a `(K, 1, 1)` float32 copy of a config value
    counts as the decimal it came from (float32 0.7 is 0.69999999: without the nudge 0.7·10 would give 6).
    """
    r = _per_agent(ratio, response_mask)
    if isinstance(ratio, Tensor) and ratio.dtype != torch.float64:
        r = r * (1 + torch.finfo(ratio.dtype).eps)
    return torch.floor(r * response_mask.sum(dim=TOKEN_DIMS).double()).clamp(min=1)


def _first_by_key(candidates: Tensor, keys: Tensor, count: Tensor) -> Tensor:
    """Per agent, the `count` candidate tokens with the smallest keys (all of them if fewer): a bool mask.

    Ties go to the earlier token in row-major order (a stable sort).
    """
    flat_candidates, flat_keys = candidates.flatten(-2), keys.flatten(-2)
    order = torch.where(flat_candidates, flat_keys, torch.inf).argsort(dim=-1, stable=True)
    positions = torch.arange(order.shape[-1], device=order.device).expand_as(order)
    rank = torch.empty_like(order).scatter_(-1, order, positions)
    return (flat_candidates & (rank < count.unsqueeze(-1))).view_as(candidates)


def _uniform_keys(like: Tensor, generator: Generators) -> Tensor:
    """Uniform [0, 1) keys shaped like `like`: from the global RNG (as verl), one generator, or one per agent.

    One generator per agent (a sequence of K) draws each agent's `(bs, T)` keys from its own generator, so an
    agent's random choices are the same batched as alone.
    """
    if generator is None:
        return torch.rand(like.shape, device=like.device)
    if isinstance(generator, torch.Generator):
        return torch.rand(like.shape, generator=generator, device=generator.device).to(like.device)
    generators = list(generator)
    agents = like[..., 0, 0].numel()
    if len(generators) != agents:
        raise ValueError(f"got {len(generators)} generators for {agents} agents")
    keys = [torch.rand(like.shape[-2:], generator=g, device=g.device).to(like.device) for g in generators]
    return torch.stack(keys).view(like.shape)


def _weighted(pg_losses: Tensor, rollout_is_weights: Tensor | None) -> Tensor:
    """The per-token loss times rollout correction's IS weights (verl passes them to every policy loss), if any."""
    return pg_losses if rollout_is_weights is None else pg_losses * rollout_is_weights


def _metrics(pg_clipfrac: Tensor | None, ppo_kl: Tensor, pg_clipfrac_lower: Tensor | None) -> dict[str, Tensor]:
    out = {PG_CLIPFRAC: pg_clipfrac, PPO_KL: ppo_kl, PG_CLIPFRAC_LOWER: pg_clipfrac_lower}
    return {key: value.detach() for key, value in out.items() if value is not None}


@register_policy_loss("gspo")
def compute_policy_loss_gspo(
    old_log_prob: Tensor,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    loss_agg_mode: str = "seq-mean-token-mean",
    *,
    clip_ratio: float | Tensor = 0.2,
    clip_ratio_low: float | Tensor | None = None,
    clip_ratio_high: float | Tensor | None = None,
    rollout_is_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """GSPO (Zheng et al. 2025, "Group Sequence Policy Optimization", arXiv 2507.18071): verl's
    `compute_policy_loss_gspo`.

    The importance ratio is the sequence's: `s_i = exp(mean_t ℓ_i,t)` with ℓ = logp − logp_old over its valid
    tokens. Each token carries `s_i,t = exp(sg[log s_i] + logp_t − sg[logp_t])` (clamped to log s ≤ 10, no
    lower clamp): the value is s_i, the gradient flows through the token's own logp only. Then PPO's clip:
    `L = max(−A·s, −A·clip(s, 1 − ε_low, 1 + ε_high))`, no dual clip. The paper's ranges are tiny
    (ε_low = 3e-4, ε_high = 4e-4 in verl's GSPO examples).

    verl aggregates with `seq-mean-token-mean` whatever `loss_agg_mode` it is given; this function honours
    `loss_agg_mode` (default `seq-mean-token-mean`): pass that for verl's numbers.

    Metrics: `actor/pg_clipfrac` = mean_m[L2 > L1] (binding, as vanilla), `actor/ppo_kl` = mean_m(−ℓ)
    (unclamped), `actor/pg_clipfrac_lower` = 0.
    """
    clip_low, clip_high = resolve_clip_range(clip_ratio, clip_ratio_low, clip_ratio_high)
    negative_approx_kl = log_prob - old_log_prob
    seq_lengths = response_mask.sum(dim=-1).clamp(min=1)
    seq_log_ratio = masked_sum(negative_approx_kl, response_mask, dim=-1) / seq_lengths  # (*, bs)
    log_ratio = log_prob - log_prob.detach() + seq_log_ratio.detach().unsqueeze(-1)
    ratio = torch.exp(torch.clamp(log_ratio, max=10.0))

    pg_losses1 = -advantages * ratio
    # a float bound beside a tensor one is fine to torch; its stubs take both floats or both tensors (as in losses)
    pg_losses2 = -advantages * torch.clamp(ratio, 1 - clip_low, 1 + clip_high)  # type: ignore[arg-type]
    pg_loss = agg_loss(_weighted(torch.maximum(pg_losses1, pg_losses2), rollout_is_weights), response_mask,
                       loss_agg_mode)

    pg_clipfrac = masked_mean((pg_losses2 > pg_losses1).to(ratio.dtype), response_mask)
    ppo_kl = masked_mean(-negative_approx_kl.detach(), response_mask)
    return pg_loss, _metrics(pg_clipfrac, ppo_kl, torch.zeros_like(ppo_kl))


@register_policy_loss("gpg")
def compute_policy_loss_gpg(
    old_log_prob: Tensor,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    loss_agg_mode: str = "token-mean",
    *,
    rollout_is_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """GPG (Chu et al. 2025, "GPG: A Simple and Strong RL Baseline for Model Reasoning", arXiv 2504.02546):
    verl's `compute_policy_loss_gpg`.

    Plain policy gradient, no ratio and no clipping: `L = −A·logp`, aggregated by `loss_agg_mode`.
    `old_log_prob` is not read. Returns no metrics (as verl: an empty dict).
    """
    return agg_loss(_weighted(-advantages * log_prob, rollout_is_weights), response_mask, loss_agg_mode), {}


def _centred_product(advantages: Tensor, log_prob: Tensor, response_mask: Tensor, eps: float) -> Tensor:
    """Per-token covariance term `(A − mean A)·(logp − mean logp)` (detached), means over the agent's valid
    tokens as `Σ / (n + eps)`: verl's Clip-Cov uses `masked_mean` (eps 1e-8), its KL-Cov a plain mean (eps 0)."""
    a, lp = advantages.detach(), log_prob.detach()
    n = response_mask.sum(dim=TOKEN_DIMS) + eps
    mean_a = (masked_sum(a, response_mask) / n).reshape(*n.shape, 1, 1)
    mean_lp = (masked_sum(lp, response_mask) / n).reshape(*n.shape, 1, 1)
    return (a - mean_a) * (lp - mean_lp)


@register_policy_loss("clip_cov")
def compute_policy_loss_clip_cov(
    old_log_prob: Tensor,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    loss_agg_mode: str = "token-mean",
    *,
    clip_ratio: float | Tensor = 0.2,
    clip_ratio_low: float | Tensor | None = None,
    clip_ratio_high: float | Tensor | None = None,
    clip_cov_ratio: float | Tensor = 0.0002,
    clip_cov_lb: float | Tensor = 1.0,
    clip_cov_ub: float | Tensor = 5.0,
    generator: Generators = None,
    rollout_is_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Clip-Cov (Cui et al. 2025, "The Entropy Mechanism of RL for Reasoning LMs", arXiv 2505.22617): verl's
    `compute_policy_loss_clip_cov`.

    PPO's clipped surrogate `max(−A·r, −A·clip(r, 1 − ε_low, 1 + ε_high))` with `r = exp(ℓ)` (no ±20 clamp,
    no dual clip), except on a few tokens whose loss is multiplied by 0 (value and gradient; they still count
    in the aggregation's denominator). Per token, `cov = (A − Ā)·(logp − mean logp)` with means over the
    agent's valid tokens. Candidates: valid tokens with `clip_cov_lb < cov < clip_cov_ub` (strict) on which
    the ordinary clip does not already bind. Of those, `max(int(clip_cov_ratio · n_valid), 1)` are drawn
    uniformly at random (all of them if fewer). verl draws with `torch.randperm` on the global RNG; here
    `generator` (one, or one per agent) makes the draw reproducible; None uses the global RNG.

    Metrics: `actor/pg_clipfrac` = share of valid tokens Clip-Cov zeroed (not the ratio clip's share),
    `actor/ppo_kl` = mean_m(−ℓ). No `actor/pg_clipfrac_lower` (as verl).
    """
    if isinstance(clip_cov_ratio, (int, float)) and not clip_cov_ratio > 0:
        raise ValueError(f"clip_cov_ratio must be > 0, got {clip_cov_ratio}")
    clip_low, clip_high = resolve_clip_range(clip_ratio, clip_ratio_low, clip_ratio_high)
    negative_approx_kl = log_prob - old_log_prob
    ratio = torch.exp(negative_approx_kl)
    pg_losses1 = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(ratio, 1 - clip_low, 1 + clip_high)  # type: ignore[arg-type]

    valid = response_mask > 0
    cov = _centred_product(advantages, log_prob, response_mask, eps=1e-8)
    candidates = valid & ~(pg_losses2 > pg_losses1) & (cov > clip_cov_lb) & (cov < clip_cov_ub)
    count = _share_count(clip_cov_ratio, response_mask)
    dropped = _first_by_key(candidates, _uniform_keys(candidates, generator), count)
    corr = (~dropped).to(log_prob.dtype)

    pg_loss = agg_loss(_weighted(torch.maximum(pg_losses1, pg_losses2) * corr, rollout_is_weights), response_mask,
                       loss_agg_mode)
    pg_clipfrac = masked_mean(dropped.to(log_prob.dtype), response_mask)
    ppo_kl = masked_mean(-negative_approx_kl.detach(), response_mask)
    return pg_loss, _metrics(pg_clipfrac, ppo_kl, None)


@register_policy_loss("kl_cov")
def compute_policy_loss_kl_cov(
    old_log_prob: Tensor,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    loss_agg_mode: str = "token-mean",
    *,
    kl_cov_ratio: float | Tensor = 0.0002,
    ppo_kl_coef: float | Tensor = 0.1,
    rollout_is_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """KL-Cov (Cui et al. 2025, "The Entropy Mechanism of RL for Reasoning LMs", arXiv 2505.22617): verl's
    `compute_policy_loss_kl_cov`.

    The unclipped surrogate `−A·r` (r = exp(ℓ), no clamp, no clip ranges at all) on every token, plus
    `ppo_kl_coef·|ℓ|` on the `max(int(kl_cov_ratio · n_valid), 1)` valid tokens with the largest
    `cov = (A − Ā)·(logp − mean logp)` (means over the agent's valid tokens). Deterministic; equal covariances
    go to the earlier token (verl's `torch.topk` leaves that order unspecified).

    `ppo_kl_coef` defaults to 0.1 (`actor.policy_loss.ppo_kl_coef`); verl's function falls back to 1.0
    only when the key is null. Metrics: `actor/ppo_kl` = mean_m|ℓ| (an absolute value, unlike the others).
    """
    if isinstance(kl_cov_ratio, (int, float)) and not kl_cov_ratio > 0:
        raise ValueError(f"kl_cov_ratio must be > 0, got {kl_cov_ratio}")
    negative_approx_kl = log_prob - old_log_prob
    abs_kl = negative_approx_kl.abs()
    pg_losses = -advantages * torch.exp(negative_approx_kl)

    cov = _centred_product(advantages, log_prob, response_mask, eps=0.0)
    count = _share_count(kl_cov_ratio, response_mask)
    penalised = _first_by_key(response_mask > 0, -cov, count)
    pg_losses = torch.where(penalised, pg_losses + ppo_kl_coef * abs_kl, pg_losses)

    pg_loss = agg_loss(_weighted(pg_losses, rollout_is_weights), response_mask, loss_agg_mode)
    return pg_loss, _metrics(None, masked_mean(abs_kl.detach(), response_mask), None)


@register_policy_loss("geo_mean")
def compute_policy_loss_geo_mean(
    old_log_prob: Tensor,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    loss_agg_mode: str = "token-mean",
    *,
    clip_ratio: float | Tensor = 0.2,
    clip_ratio_low: float | Tensor | None = None,
    clip_ratio_high: float | Tensor | None = None,
    rollout_is_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """GMPO (Zhao et al. 2025, "Geometric-Mean Policy Optimization", arXiv 2507.20673): verl's
    `compute_policy_loss_geo_mean`.

    Token log-ratios ℓ = logp − logp_old (no ±20 clamp) are clipped in log space, pessimistically by the sign
    of A: `ℓ' = sgn(A)·min(sgn(A)·ℓ, sgn(A)·clamp(ℓ, −ε_low, ε_high))`. The sequence ratio is their geometric
    mean `R_i = exp(Σ_t ℓ'·m / (Σ_t m + 1e-8))`, the sequence advantage the token mean of A, and the loss
    `−Ā_i·R_i`, averaged over *all* rows (a fully masked row adds 0 and still counts). `loss_agg_mode` is
    accepted and ignored, as in verl. The clip ranges are in log space: GMPO's recipe uses ε = 0.4.

    Metrics: `actor/pg_clipfrac` = mean_m[ℓ ≠ clamp(ℓ) and A > 0], `actor/pg_clipfrac_lower` = the same with
    A < 0 (out of range, whether or not the clip binds), `actor/ppo_kl` = mean_m(−ℓ).
    """
    clip_low, clip_high = resolve_clip_range(clip_ratio, clip_ratio_low, clip_ratio_high)
    negative_approx_kl = log_prob - old_log_prob
    sign = torch.sign(advantages)
    clamped = torch.clamp(negative_approx_kl, -clip_low, clip_high)  # type: ignore[arg-type]
    pessimistic = sign * torch.minimum(sign * negative_approx_kl, sign * clamped)

    tokens = response_mask.sum(dim=-1) + 1e-8
    seq_ratio = torch.exp(masked_sum(pessimistic, response_mask, dim=-1) / tokens)
    seq_advantage = masked_sum(advantages, response_mask, dim=-1) / tokens
    pg_losses = -seq_advantage * seq_ratio
    if rollout_is_weights is not None:  # verl: the token weights' geometric mean over the row
        log_weights = masked_sum(torch.log(rollout_is_weights + 1e-10), response_mask, dim=-1)
        pg_losses = pg_losses * torch.exp(log_weights / tokens)
    pg_loss = pg_losses.mean(dim=-1)

    clipped = negative_approx_kl != clamped
    pg_clipfrac = masked_mean((clipped & (advantages > 0)).to(log_prob.dtype), response_mask)
    pg_clipfrac_lower = masked_mean((clipped & (advantages < 0)).to(log_prob.dtype), response_mask)
    ppo_kl = masked_mean(-negative_approx_kl.detach(), response_mask)
    return pg_loss, _metrics(pg_clipfrac, ppo_kl, pg_clipfrac_lower)
