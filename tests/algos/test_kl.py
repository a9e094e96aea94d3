import math

import pytest
import torch

from playground.algos.kl import AdaptiveKLController, FixedKLController, get_kl_controller, kl_penalty

LOGP = torch.tensor([-1.0, -2.0, -0.5])
REF = torch.tensor([-1.5, -1.0, -0.5])


def test_estimators_hand_computed():
    d = [0.5, -1.0, 0.0]
    assert kl_penalty(LOGP, REF, "kl").tolist() == pytest.approx(d)
    assert kl_penalty(LOGP, REF, "k1").tolist() == pytest.approx(d)
    assert kl_penalty(LOGP, REF, "abs").tolist() == pytest.approx([0.5, 1.0, 0.0])
    assert kl_penalty(LOGP, REF, "k2").tolist() == pytest.approx([0.125, 0.5, 0.0])
    # k3 with u = ref - logp: exp(u) - u - 1
    expected = [math.exp(u) - u - 1 for u in (-0.5, 1.0, 0.0)]
    assert kl_penalty(LOGP, REF, "low_var_kl").tolist() == pytest.approx(expected)
    assert kl_penalty(LOGP, REF, "k3").tolist() == pytest.approx(expected)


def test_k3_clamps():
    # u clamped to 20 before exp, result clamped to 10
    assert kl_penalty(torch.tensor([-100.0]), torch.tensor([0.0]), "k3").item() == 10.0
    # u = -20 -> exp(-20) + 20 - 1 ~ 19 -> clamped to 10
    assert kl_penalty(torch.tensor([0.0]), torch.tensor([-100.0]), "k3").item() == 10.0


def test_k3_stays_finite_where_the_policy_gives_a_sampled_token_no_probability():
    """Before verl clamped u ahead of exp, exp(u) - u - 1 at logp = -inf was inf - inf = NaN, which the clamp after
    passes: the kl_loss NaN reports. With both clamps k3 (= low_var_kl) is 10 there, with no gradient
    (docs/tuning.md, "Why training_crash on the token family is not a k3 blow-up")."""
    logp = torch.tensor([float("-inf"), -1e4]).requires_grad_(True)
    value = kl_penalty(logp, torch.tensor([-0.1, -0.1]), "k3")
    assert value.tolist() == [10.0, 10.0]
    value.sum().backward()
    assert logp.grad.tolist() == [0.0, 0.0]
    unclamped = torch.tensor(-0.1) - logp.detach()[0]
    assert torch.isnan(torch.clamp(torch.exp(unclamped) - unclamped - 1, min=-10, max=10))  # the old form


def test_straight_through_plus_suffix():
    logp = LOGP.clone().requires_grad_(True)
    value = kl_penalty(logp, REF, "k3+")
    assert value.tolist() == pytest.approx(kl_penalty(LOGP, REF, "k3").tolist())
    value.sum().backward()
    assert logp.grad.tolist() == pytest.approx([0.5, -1.0, 0.0])  # k2's gradient: d


def test_unknown_and_full():
    with pytest.raises(ValueError, match="known"):
        kl_penalty(LOGP, REF, "k9")
    with pytest.raises(NotImplementedError):
        kl_penalty(LOGP, REF, "full")


def test_fixed_controller_is_constant():
    ctrl = get_kl_controller("fixed", 0.001)
    assert isinstance(ctrl, FixedKLController)
    ctrl.update(torch.tensor(5.0), 100)
    assert ctrl.value.item() == pytest.approx(0.001)


def test_adaptive_controller_ziegler_rule():
    ctrl = get_kl_controller("adaptive", 0.1, target_kl=0.1, horizon=1000)
    assert isinstance(ctrl, AdaptiveKLController)
    ctrl.update(torch.tensor(0.15), n_steps=100)  # error 0.5 -> clipped 0.2; mult 1 + 0.2*100/1000
    assert ctrl.value.item() == pytest.approx(0.1 * 1.02)
    ctrl.update(torch.tensor(0.09), n_steps=100)  # error -0.1 -> mult 0.99
    assert ctrl.value.item() == pytest.approx(0.1 * 1.02 * 0.99)
    with pytest.raises(ValueError, match="horizon"):
        get_kl_controller("adaptive", 0.1, horizon=0)
    with pytest.raises(ValueError, match="known"):
        get_kl_controller("pid", 0.1)


def test_adaptive_controller_per_agent():
    ctrl = AdaptiveKLController(torch.tensor([0.1, 0.1]), 0.1, 100)
    ctrl.update(torch.tensor([0.2, 0.05]), n_steps=10)
    assert ctrl.value.tolist() == pytest.approx([0.1 * 1.02, 0.1 * 0.98])
