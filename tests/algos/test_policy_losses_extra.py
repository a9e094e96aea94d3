import math

import pytest
import torch

from playground.algos.losses import POLICY_LOSSES, compute_policy_loss_vanilla, get_policy_loss_fn
from playground.algos.policy_losses_extra import (
    compute_policy_loss_clip_cov,
    compute_policy_loss_geo_mean,
    compute_policy_loss_gpg,
    compute_policy_loss_gspo,
    compute_policy_loss_kl_cov,
)

NAMES = {"gspo": compute_policy_loss_gspo, "gpg": compute_policy_loss_gpg, "clip_cov": compute_policy_loss_clip_cov,
         "kl_cov": compute_policy_loss_kl_cov, "geo_mean": compute_policy_loss_geo_mean}


def _two(x):
    """The same `(bs, T)` tensor for two agents: `(2, bs, T)`."""
    return torch.stack([x, x])


def _assert_slices_match(batched, solo_fn, k):
    loss, metrics = batched
    solo_loss, solo = solo_fn()
    assert loss[k].item() == pytest.approx(solo_loss.item(), rel=1e-6, abs=1e-7)
    assert set(metrics) == set(solo)
    for key in solo:
        assert metrics[key][k].item() == pytest.approx(solo[key].item(), rel=1e-6, abs=1e-7)


def test_registered_under_verl_names_and_share_the_call_site():
    for name, fn in NAMES.items():
        assert get_policy_loss_fn(name) is fn
    assert set(NAMES) | {"vanilla"} <= set(POLICY_LOSSES)
    # One call site has every key; the registry picks each loss's own.
    g = torch.Generator().manual_seed(0)
    old, new, adv = (torch.randn(3, 4, generator=g) * 0.1 for _ in range(3))
    keys = dict(clip_ratio=0.2, clip_ratio_low=None, clip_ratio_high=None, clip_ratio_c=3.0, clip_cov_ratio=0.0002,
                clip_cov_lb=1.0, clip_cov_ub=5.0, kl_cov_ratio=0.0002, ppo_kl_coef=0.1, generator=g)
    for name in POLICY_LOSSES:
        own = POLICY_LOSSES.select(name, keys)
        loss, metrics = get_policy_loss_fn(name)(old, new, adv, torch.ones(3, 4), "token-mean", **own)
        assert loss.shape == () and all(v.shape == () for v in metrics.values())
    vanilla_keys = POLICY_LOSSES.select("vanilla", keys)
    assert compute_policy_loss_vanilla(old, new, adv, torch.ones(3, 4), **vanilla_keys)[0].shape == ()


@pytest.mark.parametrize("name", sorted(NAMES) + ["vanilla"])
def test_a_misspelt_keyword_raises(name):
    """No loss swallows unknown keywords: a typo is an error, at the loss and at the registry's pick."""
    old = new = adv = torch.zeros(2, 3)
    with pytest.raises(TypeError):
        get_policy_loss_fn(name)(old, new, adv, torch.ones(2, 3), "token-mean", clip_ratoi=0.2)
    with pytest.raises(TypeError, match="clip_ratoi"):
        POLICY_LOSSES.select(name, {"clip_ratoi": 0.2})


# ---- GSPO --------------------------------------------------------------------------------------------------------
# Row 0: A = +1, log-ratios (0.2, 0.0) and a padded 5.0 that must not count: sequence mean 0.1 -> s = e^0.1 = 1.10517.
# Row 1: A = -1, log-ratios (-0.3, -0.1, 0.1): mean -0.1 -> s = e^-0.1 = 0.904837. Every token of a row carries s.
GSPO_OLD = torch.zeros(2, 3)
GSPO_NEW = torch.tensor([[0.2, 0.0, 5.0], [-0.3, -0.1, 0.1]])
GSPO_ADV = torch.tensor([[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0]])
GSPO_MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])


def test_gspo_hand_computed_sequence_ratio_and_two_agents():
    s0, s1 = math.exp(0.1), math.exp(-0.1)
    clips = torch.tensor([0.05, 0.2]).view(2, 1, 1)
    batched = compute_policy_loss_gspo(*map(_two, (GSPO_OLD, GSPO_NEW, GSPO_ADV, GSPO_MASK)), clip_ratio=clips)
    loss, metrics = batched
    # Agent 0, eps 0.05: row 0 max(-1.10517, -1.05) = -1.05 (clipped); row 1 max(0.904837, 0.95) = 0.95 (clipped).
    # seq-mean-token-mean (the default): (-1.05 + 0.95) / 2 = -0.05.
    assert loss[0].item() == pytest.approx(-0.05, abs=1e-6)
    # Agent 1, eps 0.2: both inside the band: (-1.10517 + 0.904837) / 2 = -0.100167.
    assert loss[1].item() == pytest.approx((-s0 + s1) / 2, rel=1e-5)
    assert metrics["actor/pg_clipfrac"].tolist() == pytest.approx([1.0, 0.0])  # 5/5 tokens bind, then 0/5
    # ppo_kl = mean(-l) over the 5 valid tokens: -(0.2 + 0 - 0.3 - 0.1 + 0.1) / 5 = 0.02
    assert metrics["actor/ppo_kl"].tolist() == pytest.approx([0.02, 0.02], rel=1e-5)
    assert metrics["actor/pg_clipfrac_lower"].tolist() == [0.0, 0.0]
    for k, clip in enumerate([0.05, 0.2]):
        _assert_slices_match(batched, lambda c=clip: compute_policy_loss_gspo(
            GSPO_OLD, GSPO_NEW, GSPO_ADV, GSPO_MASK, clip_ratio=c), k)


def test_gspo_honours_loss_agg_mode_and_gradient_through_own_token():
    # token-mean, eps 0.2: (2 * -1.10517 + 3 * 0.904837) / 5 = 0.100834
    loss, _ = compute_policy_loss_gspo(GSPO_OLD, GSPO_NEW, GSPO_ADV, GSPO_MASK, "token-mean")
    assert loss.item() == pytest.approx((-2 * math.exp(0.1) + 3 * math.exp(-0.1)) / 5, rel=1e-5)
    new = GSPO_NEW.clone().requires_grad_(True)
    compute_policy_loss_gspo(GSPO_OLD, new, GSPO_ADV, GSPO_MASK)[0].backward()
    # d/dlogp_t of (1/2)·(1/n_i)·Σ(-A·s_i): -A·s_i / (2·n_i); row 0 (n=2): -1.10517/4; row 1 (n=3): +0.904837/6
    assert new.grad[0, :2].tolist() == pytest.approx([-math.exp(0.1) / 4] * 2, rel=1e-5)
    assert new.grad[0, 2].item() == 0.0
    assert new.grad[1].tolist() == pytest.approx([math.exp(-0.1) / 6] * 3, rel=1e-5)


def test_gspo_log_ratio_clamped_above_at_10():
    # mean log-ratio 12 -> clamped to 10; A = -1 so the unclipped term wins: loss = e^10
    loss, _ = compute_policy_loss_gspo(torch.zeros(1, 1), torch.tensor([[12.0]]), -torch.ones(1, 1), torch.ones(1, 1))
    assert loss.item() == pytest.approx(math.exp(10.0), rel=1e-5)


# ---- GPG ---------------------------------------------------------------------------------------------------------
def test_gpg_plain_policy_gradient_no_metrics():
    logp = torch.tensor([[-1.0, -3.0], [-2.0, -0.5]])
    adv = torch.tensor([[2.0, -1.0], [0.5, 4.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    # L = -A·logp: row 0 (2, -3), row 1 (1, [2 padded]) -> token-mean (2 - 3 + 1) / 3 = 0
    # seq-mean-token-sum: (-1 + 1) / 2 = 0; seq-mean-token-mean: (-0.5 + 1) / 2 = 0.25
    loss, metrics = compute_policy_loss_gpg(torch.full_like(logp, 9.0), logp, adv, mask, "seq-mean-token-mean")
    assert loss.item() == pytest.approx(0.25) and metrics == {}
    assert compute_policy_loss_gpg(None, logp, adv, mask)[0].item() == pytest.approx(0.0, abs=1e-7)
    # Two agents with different data (GPG has no coefficients): agent 1's advantages doubled -> loss doubles.
    batched = compute_policy_loss_gpg(None, _two(logp), torch.stack([adv, 2 * adv]), _two(mask), "seq-mean-token-mean")
    assert batched[0].tolist() == pytest.approx([0.25, 0.5])
    for k in range(2):
        _assert_slices_match(batched, lambda k=k: compute_policy_loss_gpg(
            None, logp, adv * (k + 1), mask, "seq-mean-token-mean"), k)


# ---- Clip-Cov ----------------------------------------------------------------------------------------------------
# Six valid tokens and one pad. A = (3, 1, -1, -3, 2, -2) has mean 0; logp = (-1, -2, -3, -4, -2, -6) has mean -3,
# centred (2, 1, 0, -1, 1, -3): cov = A·centred = (6, 1, 0, 3, 2, 6). On-policy except token 4 (r = 1.5, A = 2:
# -3 vs clipped -2.4, the clip binds there). The pad (A = 1, logp = -1) would have cov 2 but is masked.
CC_ADV = torch.tensor([[3.0, 1.0, -1.0, -3.0, 2.0, -2.0, 1.0]])
CC_NEW = torch.tensor([[-1.0, -2.0, -3.0, -4.0, -2.0, -6.0, -1.0]])
CC_OLD = CC_NEW - torch.tensor([[0.0, 0.0, 0.0, 0.0, math.log(1.5), 0.0, 0.0]])
CC_MASK = torch.tensor([[1.0] * 6 + [0.0]])


def test_clip_cov_hand_computed_two_agents():
    lb = torch.tensor([1.0, 0.5]).view(2, 1, 1)
    ratio = torch.tensor([0.0002, 0.34]).view(2, 1, 1)  # float32, as the trainer's (K, 1, 1) copies are
    new = _two(CC_NEW).requires_grad_(True)
    loss, metrics = batched = compute_policy_loss_clip_cov(
        _two(CC_OLD), new, _two(CC_ADV), _two(CC_MASK), clip_cov_lb=lb, clip_cov_ratio=ratio)
    # Per-token PPO losses: (-3, -1, 1, 3, max(-3, -2.4) = -2.4, 2).
    # Agent 0: candidates with 1 < cov < 5 and no binding clip: token 3 only (token 1's cov = 1 is not > 1, token 4
    # is clipped already); max(int(0.0002·6), 1) = 1 -> token 3 zeroed: (-3 - 1 + 1 + 0 - 2.4 + 2) / 6 = -3.4 / 6.
    assert loss[0].item() == pytest.approx(-3.4 / 6, rel=1e-5)
    # Agent 1: lb 0.5 admits token 1 as well; int(0.34·6) = 2 -> tokens 1 and 3 zeroed: (-3 + 1 - 2.4 + 2) / 6 = -0.4
    assert loss[1].item() == pytest.approx(-0.4, rel=1e-5)
    # pg_clipfrac counts only the tokens Clip-Cov zeroed (1/6, 2/6), not token 4's ratio clip.
    assert metrics["actor/pg_clipfrac"].tolist() == pytest.approx([1 / 6, 2 / 6])
    # ppo_kl = mean(old - new) = -log(1.5) / 6
    assert metrics["actor/ppo_kl"].tolist() == pytest.approx([-math.log(1.5) / 6] * 2, rel=1e-5)
    assert "actor/pg_clipfrac_lower" not in metrics
    loss.sum().backward()
    # zeroed tokens get no gradient; token 2 (A = -1, r = 1): d(-A·r)/dlogp / 6 = 1/6; token 4 is clipped: 0
    assert new.grad[0, 0].tolist() == pytest.approx([-3 / 6, -1 / 6, 1 / 6, 0.0, 0.0, 2 / 6, 0.0], abs=1e-6)
    assert new.grad[1, 0, 1].item() == 0.0 and new.grad[1, 0, 3].item() == 0.0
    for k, (b, r) in enumerate([(1.0, 0.0002), (0.5, 0.34)]):
        _assert_slices_match(batched, lambda b=b, r=r: compute_policy_loss_clip_cov(
            CC_OLD, CC_NEW, CC_ADV, CC_MASK, clip_cov_lb=b, clip_cov_ratio=r), k)


def test_clip_cov_random_choice_is_uniform_and_seeded():
    # lb 0.5 -> candidates tokens 1 (cov 1) and 3 (cov 3); one of them is zeroed, picked at random.
    def zeroed(gen):
        _, m = compute_policy_loss_clip_cov(CC_OLD, CC_NEW, CC_ADV, CC_MASK, clip_cov_lb=0.5, generator=gen)
        return m["actor/pg_clipfrac"].item()

    def loss(seed):
        return compute_policy_loss_clip_cov(CC_OLD, CC_NEW, CC_ADV, CC_MASK, clip_cov_lb=0.5,
                                            generator=torch.Generator().manual_seed(seed))[0].item()

    assert zeroed(torch.Generator().manual_seed(0)) == pytest.approx(1 / 6)
    # zeroing token 1 gives (-3 + 0 + 1 + 3 - 2.4 + 2) / 6 = 0.6 / 6; zeroing token 3 gives -3.4 / 6
    outcomes = [loss(seed) for seed in range(200)]
    assert set(round(x, 5) for x in outcomes) == {round(0.6 / 6, 5), round(-3.4 / 6, 5)}
    assert 60 < sum(x > 0 for x in outcomes) < 140  # ~Binomial(200, 1/2)
    assert loss(7) == loss(7)
    # One generator per agent: each agent's draw is its solo draw, whatever the other agent does.
    gens = [torch.Generator().manual_seed(s) for s in (3, 4)]
    batched = compute_policy_loss_clip_cov(_two(CC_OLD), _two(CC_NEW), _two(CC_ADV), _two(CC_MASK),
                                           clip_cov_lb=0.5, generator=gens)
    assert batched[0].tolist() == pytest.approx([loss(3), loss(4)], rel=1e-6)
    with pytest.raises(ValueError, match="generators"):
        compute_policy_loss_clip_cov(_two(CC_OLD), _two(CC_NEW), _two(CC_ADV), _two(CC_MASK), generator=gens[:1])
    with pytest.raises(ValueError, match="clip_cov_ratio"):
        compute_policy_loss_clip_cov(CC_OLD, CC_NEW, CC_ADV, CC_MASK, clip_cov_ratio=0.0)


# ---- KL-Cov ------------------------------------------------------------------------------------------------------
# Four valid tokens and a pad. A = (2, -1, 1, -2), mean 0; logp = (-1, -2, -4, -1), mean -2, centred (1, 0, -2, 1):
# cov = (2, 0, -2, -2). The pad (A = 5, logp = 0) would have cov 10 but is masked. Log-ratios l = (0.5, 0.2, -0.3, 0).
KC_ADV = torch.tensor([[2.0, -1.0, 1.0, -2.0, 5.0]])
KC_NEW = torch.tensor([[-1.0, -2.0, -4.0, -1.0, 0.0]])
KC_OLD = KC_NEW - torch.tensor([[0.5, 0.2, -0.3, 0.0, 3.0]])
KC_MASK = torch.tensor([[1.0, 1.0, 1.0, 1.0, 0.0]])


def test_kl_cov_hand_computed_two_agents():
    r = [math.exp(0.5), math.exp(0.2), math.exp(-0.3), 1.0]
    # Unclipped surrogate -A·r: (-2·1.648721, 1.221403, -0.740818, 2); no clip range applies (r = 1.65 stays).
    base = [-2 * r[0], r[1], -r[2], 2.0]
    ratio = torch.tensor([0.0002, 0.5], dtype=torch.float64).view(2, 1, 1)
    coef = torch.tensor([0.1, 1.0]).view(2, 1, 1)
    loss, metrics = batched = compute_policy_loss_kl_cov(
        _two(KC_OLD), _two(KC_NEW), _two(KC_ADV), _two(KC_MASK), kl_cov_ratio=ratio, ppo_kl_coef=coef)
    # Agent 0: max(int(0.0002·4), 1) = 1 token, the top cov (token 0): + 0.1·|0.5|
    assert loss[0].item() == pytest.approx((sum(base) + 0.1 * 0.5) / 4, rel=1e-5)
    # Agent 1: int(0.5·4) = 2 tokens, covs 2 and 0 (tokens 0, 1): + 1.0·0.5 + 1.0·0.2
    assert loss[1].item() == pytest.approx((sum(base) + 0.5 + 0.2) / 4, rel=1e-5)
    # ppo_kl is the mean |l|: (0.5 + 0.2 + 0.3 + 0) / 4 = 0.25; no other metric
    assert set(metrics) == {"actor/ppo_kl"}
    assert metrics["actor/ppo_kl"].tolist() == pytest.approx([0.25, 0.25], rel=1e-5)
    for k, (rt, c) in enumerate([(0.0002, 0.1), (0.5, 1.0)]):
        _assert_slices_match(batched, lambda rt=rt, c=c: compute_policy_loss_kl_cov(
            KC_OLD, KC_NEW, KC_ADV, KC_MASK, kl_cov_ratio=rt, ppo_kl_coef=c), k)


def test_kl_cov_defaults_and_float32_share_count():
    # default ppo_kl_coef 0.1 (actor.policy_loss.ppo_kl_coef), default ratio 0.0002 -> 1 token
    loss, _ = compute_policy_loss_kl_cov(KC_OLD, KC_NEW, KC_ADV, KC_MASK)
    base = -2 * math.exp(0.5) + math.exp(0.2) - math.exp(-0.3) + 2
    assert loss.item() == pytest.approx((base + 0.05) / 4, rel=1e-5)
    # float32 0.75 is exact, float32 0.7 is 0.69999999: int(0.7·10) is 7 in verl (Python floats); so is it here.
    # |l| = 1 on every token, so (with - without the KL term)·10 tokens counts the penalised tokens
    new, adv = torch.linspace(0.0, -9.0, 10).view(1, 10), torch.linspace(1.0, 0.1, 10).view(1, 10)
    old = new - 1.0
    for share, expected in [(0.7, 7), (torch.tensor(0.7), 7), (torch.tensor(0.75), 7)]:
        plain, _ = compute_policy_loss_kl_cov(old, new, adv, torch.ones(1, 10), kl_cov_ratio=share, ppo_kl_coef=1.0)
        no_kl, _ = compute_policy_loss_kl_cov(old, new, adv, torch.ones(1, 10), kl_cov_ratio=share, ppo_kl_coef=0.0)
        assert (plain - no_kl).item() * 10 == pytest.approx(expected, rel=1e-5)
    with pytest.raises(ValueError, match="kl_cov_ratio"):
        compute_policy_loss_kl_cov(KC_OLD, KC_NEW, KC_ADV, KC_MASK, kl_cov_ratio=0.0)


# ---- GMPO (geo_mean) ---------------------------------------------------------------------------------------------
# Row 0: A = +1, l = (0.5, -0.1) + a pad; row 1: A = -1, l = (-0.6, 0.2, 0.1); row 2 fully masked. Pads carry l = 3.
GM_OLD = torch.zeros(3, 3)
GM_NEW = torch.tensor([[0.5, -0.1, 3.0], [-0.6, 0.2, 0.1], [3.0, 3.0, 3.0]])
GM_ADV = torch.tensor([[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0], [2.0, 2.0, 2.0]])
GM_MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])


def test_geo_mean_hand_computed_two_agents():
    clips = torch.tensor([0.4, 0.05]).view(2, 1, 1)
    loss, metrics = batched = compute_policy_loss_geo_mean(
        *map(_two, (GM_OLD, GM_NEW, GM_ADV, GM_MASK)), clip_ratio=clips)
    # Agent 0, eps 0.4: row 0 (A > 0) min(l, clamp(l)) = (0.4, -0.1) -> R = e^0.15, loss -e^0.15;
    # row 1 (A < 0) -min(-l, -clamp(l)) = (-0.4, 0.2, 0.1) -> R = e^(-0.1/3), loss +e^(-0.1/3);
    # row 2 adds 0 and counts: mean over 3 rows.
    assert loss[0].item() == pytest.approx((-math.exp(0.15) + math.exp(-0.1 / 3)) / 3, rel=1e-5)
    # Agent 1, eps 0.05: row 0 (0.05, -0.1) -> e^-0.025; row 1 (-0.05, 0.2, 0.1) -> e^(0.25/3)
    assert loss[1].item() == pytest.approx((-math.exp(-0.025) + math.exp(0.25 / 3)) / 3, rel=1e-5)
    # pg_clipfrac: l outside the range with A > 0, over the 5 valid tokens: agent 0 token 0.5 -> 1/5;
    # agent 1 both row-0 tokens (-0.1 is out of range too, though the pessimistic min keeps it) -> 2/5
    assert metrics["actor/pg_clipfrac"].tolist() == pytest.approx([1 / 5, 2 / 5])
    # pg_clipfrac_lower, A < 0: agent 0 only -0.6 -> 1/5; agent 1 all of row 1 -> 3/5
    assert metrics["actor/pg_clipfrac_lower"].tolist() == pytest.approx([1 / 5, 3 / 5])
    # ppo_kl = -(0.5 - 0.1 - 0.6 + 0.2 + 0.1) / 5 = -0.02
    assert metrics["actor/ppo_kl"].tolist() == pytest.approx([-0.02, -0.02], rel=1e-5)
    for k, clip in enumerate([0.4, 0.05]):
        _assert_slices_match(batched, lambda c=clip: compute_policy_loss_geo_mean(
            GM_OLD, GM_NEW, GM_ADV, GM_MASK, clip_ratio=c), k)


def test_geo_mean_ignores_loss_agg_mode_and_asymmetric_clip():
    modes = [compute_policy_loss_geo_mean(GM_OLD, GM_NEW, GM_ADV, GM_MASK, mode, clip_ratio=0.4)[0].item()
             for mode in ("token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")]
    assert modes == [modes[0]] * 3
    # low 0.7, high 0.3: row 0 -> (0.3, -0.1), R = e^0.1; row 1 -> -0.6 is inside [-0.7, 0.3]: (-0.6, 0.2, 0.1)
    # -> R = e^(-0.1), loss +e^(-0.1)
    loss, m = compute_policy_loss_geo_mean(GM_OLD, GM_NEW, GM_ADV, GM_MASK, clip_ratio_low=0.7, clip_ratio_high=0.3)
    assert loss.item() == pytest.approx((-math.exp(0.1) + math.exp(-0.1)) / 3, rel=1e-5)
    assert m["actor/pg_clipfrac_lower"].item() == 0.0
