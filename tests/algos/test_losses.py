import math

import pytest
import torch

from playground.algos.losses import (
    agg_loss,
    compute_policy_loss_vanilla,
    compute_value_loss,
    explained_variance,
    get_policy_loss_fn,
)

L = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0], [9.0, 9.0, 9.0]])
M = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])  # last row fully masked


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("token-mean", (1 + 2 + 3 + 4) / 4),
        ("seq-mean-token-sum", (6 + 4) / 2),  # the fully masked row does not count
        ("seq-mean-token-mean", (2 + 4) / 2),
        ("seq-mean-token-sum-norm", (6 + 4) / 3),  # divided by the padded width, not the sequence count
    ],
)
def test_agg_loss_modes(mode, expected):
    assert agg_loss(L, M, mode).item() == pytest.approx(expected)


def test_agg_loss_unknown_mode_and_scale_factor():
    with pytest.raises(ValueError, match="known"):
        agg_loss(L, M, "mean")
    assert agg_loss(L, M, "seq-mean-token-sum-norm", loss_scale_factor=10).item() == pytest.approx(1.0)


def _ratio_inputs(ratios, advantages):
    old = torch.zeros(1, len(ratios))
    new = torch.log(torch.tensor([ratios]))
    return old, new, torch.tensor([advantages]), torch.ones(1, len(ratios))


def test_vanilla_hand_computed_binding_clipfrac():
    # tokens: (r, A) = (1.5, +1) clip binds; (0.5, -1) clip binds; (1.5, -1) out of band but optimistic
    # side -> not counted; (1.1, +2) inside band; (5.0, -1) dual clip binds (r > c = 3)
    old, new, adv, mask = _ratio_inputs([1.5, 0.5, 1.5, 1.1, 5.0], [1.0, -1.0, -1.0, 2.0, -1.0])
    loss, metrics = compute_policy_loss_vanilla(old, new, adv, mask, clip_ratio=0.2)
    # per-token losses: max(-1.5, -1.2) = -1.2 ; max(0.5, 0.8) = 0.8 ; max(1.5, 1.2) = 1.5 ;
    # -2.2 ; min(max(5, 1.2), 3) = 3
    assert loss.item() == pytest.approx((-1.2 + 0.8 + 1.5 - 2.2 + 3.0) / 5)
    assert metrics["actor/pg_clipfrac"].item() == pytest.approx(2 / 5)
    # the (5.0, -1) token: L1 = 5 > L2 = 1.2 so the ordinary clip does not bind there
    assert metrics["actor/pg_clipfrac_lower"].item() == pytest.approx(1 / 5)
    expected_kl = -sum(math.log(r) for r in [1.5, 0.5, 1.5, 1.1, 5.0]) / 5
    assert metrics["actor/ppo_kl"].item() == pytest.approx(expected_kl, rel=1e-5)


def test_vanilla_asymmetric_clip_and_fallback():
    old, new, adv, mask = _ratio_inputs([1.25], [1.0])
    _, m = compute_policy_loss_vanilla(old, new, adv, mask, clip_ratio=0.2, clip_ratio_high=0.28)
    assert m["actor/pg_clipfrac"].item() == 0.0  # 1.25 < 1.28: inside the clip-higher band (DAPO)
    _, m = compute_policy_loss_vanilla(old, new, adv, mask, clip_ratio=0.2)
    assert m["actor/pg_clipfrac"].item() == 1.0
    old, new, adv, mask = _ratio_inputs([0.75], [-1.0])
    _, m = compute_policy_loss_vanilla(old, new, adv, mask, clip_ratio=0.2, clip_ratio_low=0.3)
    assert m["actor/pg_clipfrac"].item() == 0.0


def test_vanilla_log_ratio_clamped_and_on_policy_zero():
    old = torch.zeros(1, 2)
    new = torch.tensor([[50.0, -50.0]])
    adv = torch.tensor([[0.0, 0.0]])
    _, m = compute_policy_loss_vanilla(old, new, adv, torch.ones(1, 2))
    assert m["actor/ppo_kl"].item() == pytest.approx(0.0)  # (-20 + 20) / 2 after the ±20 clamp
    same = torch.randn(3, 4)
    _, m = compute_policy_loss_vanilla(same, same, torch.randn(3, 4), torch.ones(3, 4))
    assert all(v.item() == 0.0 for v in m.values())


def test_vanilla_rejects_bad_dual_clip_and_registry():
    old, new, adv, mask = _ratio_inputs([1.0], [1.0])
    with pytest.raises(ValueError, match="clip_ratio_c"):
        compute_policy_loss_vanilla(old, new, adv, mask, clip_ratio_c=1.0)
    assert get_policy_loss_fn("vanilla") is compute_policy_loss_vanilla
    with pytest.raises(ValueError, match="known"):
        get_policy_loss_fn("nope")


def test_vanilla_per_agent_clip_tensor_matches_solo():
    g = torch.Generator().manual_seed(1)
    old, new, adv = (torch.randn(2, 4, 3, generator=g) * 0.3 for _ in range(3))
    mask = torch.ones(2, 4, 3)
    clips = torch.tensor([0.1, 0.3]).view(2, 1, 1)
    loss, m = compute_policy_loss_vanilla(old, new, adv, mask, clip_ratio=clips)
    for k, clip in enumerate([0.1, 0.3]):
        solo_loss, solo = compute_policy_loss_vanilla(old[k], new[k], adv[k], mask[k], clip_ratio=clip)
        assert loss[k].item() == pytest.approx(solo_loss.item(), rel=1e-6)
        assert m["actor/pg_clipfrac"][k].item() == pytest.approx(solo["actor/pg_clipfrac"].item())


def test_value_loss_clipped_half_and_binding_fraction():
    vpreds = torch.tensor([[2.0, 0.0, 1.0]])
    values = torch.tensor([[0.0, 0.0, 0.0]])
    returns = torch.tensor([[2.0, 1.0, -1.0]])
    loss, clipfrac = compute_value_loss(vpreds, returns, values, torch.ones(1, 3), cliprange_value=0.5)
    # token 0: v 2 -> clipped 0.5; E1 = 0, E2 = 2.25 -> binds; token 1: E1 = 1 = E2; token 2: E1 = 4,
    # clipped 0.5 -> E2 = 2.25 < E1 -> not binding
    assert loss.item() == pytest.approx(0.5 * (2.25 + 1 + 4) / 3)
    assert clipfrac.item() == pytest.approx(1 / 3)


def test_explained_variance():
    returns = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    mask = torch.ones(1, 4)
    assert explained_variance(returns, returns, mask).item() == pytest.approx(1.0, abs=1e-5)
    const = torch.full((1, 4), 2.5)
    # Var(R - c) = Var(R) -> 1 - V/(V + 1e-5) ~ 0
    assert explained_variance(returns, const, mask).item() == pytest.approx(1e-5 / (5 / 3 + 1e-5), abs=1e-6)
    worse = torch.tensor([[4.0, 3.0, 2.0, 1.0]])
    # R - V = (-3, -1, 1, 3): unbiased var 20/3 ; Var(R) = 5/3 -> 1 - 4 = -3 (unbounded below)
    assert explained_variance(returns, worse, mask).item() == pytest.approx(1 - (20 / 3) / (5 / 3 + 1e-5), rel=1e-5)
