"""Rollout correction wired into the losses, the update and the step (`playground.step.rollout_correction`), with
batches built here: the rollout's log-probs are the old ones plus a known perturbation (the rollout worker that writes
them is issue 23's other part)."""

from __future__ import annotations

import math

import pytest
import torch

from playground.algos.aggregate import agg_loss
from playground.algos.losses import POLICY_LOSSES, compute_policy_loss_vanilla
from playground.algos.rollout_correction.bypass import compute_policy_loss_bypass_mode, compute_policy_loss_reinforce
from playground.algos.rollout_correction.spec import RolloutCorrectionSpec
from playground.models.mlp import GymActor
from playground.step.optim import AgentAdamW
from playground.step.rollout_correction import RolloutCorrection
from playground.step.update import UpdateShape, update_actor

OFF = {"rollout_is": None, "rollout_is_threshold": 2.0, "rollout_is_batch_normalize": False, "rollout_rs": None,
       "rollout_rs_threshold": None, "bypass_mode": False, "loss_type": "ppo_clip"}


def _spec(**settings) -> RolloutCorrectionSpec:
    return RolloutCorrectionSpec.from_config({**OFF, **settings})


def _loss_inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(1, 4, 5, generator=g) * 2
    log_prob = old + torch.randn(1, 4, 5, generator=g) * 0.1
    advantages = torch.randn(1, 4, 5, generator=g)
    mask = torch.ones(1, 4, 5)
    mask[0, 1, 3:] = 0
    return old, log_prob, advantages, mask


# ---- the losses -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", sorted(POLICY_LOSSES))
def test_every_policy_loss_takes_the_weights_and_unit_weights_change_nothing(mode):
    old, log_prob, advantages, mask = _loss_inputs()
    kwargs = {"generator": [torch.Generator().manual_seed(1)]} if mode == "clip_cov" else {}
    plain, _ = POLICY_LOSSES.get(mode)(old, log_prob, advantages, mask, "token-mean", **kwargs)
    kwargs = {"generator": [torch.Generator().manual_seed(1)]} if mode == "clip_cov" else {}
    weighted, _ = POLICY_LOSSES.get(mode)(old, log_prob, advantages, mask, "token-mean",
                                          rollout_is_weights=torch.ones_like(old), **kwargs)
    torch.testing.assert_close(plain, weighted)
    assert "rollout_is_weights" in POLICY_LOSSES.keywords(mode)


def test_vanilla_multiplies_its_per_token_loss_by_the_weights_before_aggregating():
    old, log_prob, advantages, mask = _loss_inputs()
    weights = torch.rand(1, 4, 5, generator=torch.Generator().manual_seed(3)) * 2
    loss, _ = compute_policy_loss_vanilla(old, log_prob, advantages, mask, "seq-mean-token-mean",
                                          rollout_is_weights=weights)
    ratio = torch.exp(log_prob - old)
    per_token = torch.maximum(-advantages * ratio, -advantages * ratio.clamp(0.8, 1.2))
    per_token = torch.where(advantages < 0, torch.minimum(per_token, -advantages * 3.0), per_token)
    torch.testing.assert_close(loss, agg_loss(per_token * weights, mask, "seq-mean-token-mean"))


def test_geo_mean_weights_each_row_by_the_geometric_mean_of_its_token_weights():
    old, log_prob, advantages, mask = _loss_inputs()
    weights = torch.full_like(old, 1.0)
    weights[0, 2] = 4.0  # row 2's geometric mean is 4: its loss term four times larger
    plain_rows = [POLICY_LOSSES.get("geo_mean")(old, log_prob, advantages, mask, rollout_is_weights=w)[0]
                  for w in (torch.ones_like(old), weights)]
    tokens = mask.sum(-1)
    log_ratio, sign = log_prob - old, torch.sign(advantages)
    pessimistic = sign * torch.minimum(sign * log_ratio, sign * log_ratio.clamp(-0.2, 0.2))
    seq_ratio = torch.exp((pessimistic * mask).sum(-1) / (tokens + 1e-8))
    row2 = (-(advantages * mask).sum(-1) / (tokens + 1e-8) * seq_ratio)[0, 2]
    # the mean over 4 rows: only row 2's term changes, from 1x to 4x
    torch.testing.assert_close(plain_rows[1] - plain_rows[0], (4.0 - 1.0) * row2.view(1) / 4, rtol=1e-5, atol=1e-7)


def test_reinforce_is_the_weighted_log_prob_gradient():
    rollout, log_prob, advantages, mask = _loss_inputs()
    weights = torch.rand_like(rollout)
    loss, metrics = compute_policy_loss_reinforce(rollout, log_prob, advantages, mask, "token-mean", weights)
    torch.testing.assert_close(loss, (-advantages * log_prob * weights * mask).sum().view(1) / mask.sum())
    torch.testing.assert_close(metrics["actor/ppo_kl"],
                               ((rollout - log_prob) * mask).sum().view(1) / (mask.sum() + 1e-8))


def test_bypass_ppo_clip_is_ppo_against_the_rollout_with_the_rejection_mask_and_no_weights():
    rollout, log_prob, advantages, mask = _loss_inputs()
    log_prob[0, 0, 0] = rollout[0, 0, 0] + 1.0  # far off: rejected by token_k1 in [0.5, 2]
    settings = {"bypass_mode": True, "rollout_is": "token", "rollout_rs": "token_k1", "rollout_rs_threshold": "0.5_2.0"}
    loss, metrics = compute_policy_loss_bypass_mode(rollout, log_prob, advantages, mask, "token-mean",
                                                    rollout_correction=_spec(**settings), ppo_kwargs={})
    kept = mask.clone()
    kept[0, 0, 0] = 0
    expected, _ = compute_policy_loss_vanilla(rollout, log_prob, advantages, kept, "token-mean")
    torch.testing.assert_close(loss, expected)
    assert float(metrics["rollout_corr/rollout_rs_masked_fraction"]) == pytest.approx(1 / mask.sum().item(), rel=1e-6)
    assert "rollout_corr/rollout_is_mean" in metrics  # computed for the log, not applied
    reinforce, _ = compute_policy_loss_bypass_mode(rollout, log_prob, advantages, mask, "token-mean",
                                                   rollout_correction=_spec(**settings, loss_type="reinforce"),
                                                   ppo_kwargs={})
    weights = torch.exp(log_prob - rollout).clamp(max=2.0) * mask
    torch.testing.assert_close(reinforce, (-advantages * log_prob * weights * kept).sum().view(1) / kept.sum())


# ---- the update -------------------------------------------------------------------------------------------------
class _Actor:
    model_input_keys = ("obs", "actions")

    def __init__(self):
        self.net = GymActor(3, [8], [torch.Generator().manual_seed(0)], num_actions=2)

    def log_prob_and_entropy(self, mb):
        return self.net.log_prob_and_entropy(mb)


def _batch(rows=8):
    g = torch.Generator().manual_seed(0)
    return {"obs": torch.randn(1, rows, 3, generator=g), "actions": torch.randint(0, 2, (1, rows), generator=g),
            "advantages": torch.randn(1, rows, 1, generator=g), "response_mask": torch.ones(1, rows, 1)}


def _update(actor, batch, rollout_correction=None):
    one = torch.ones(1, 1, 1)
    clip = {"clip_ratio": one * 0.2, "clip_ratio_low": one * 0.2, "clip_ratio_high": one * 0.2,
            "clip_ratio_c": one * 3.0}
    return update_actor(actor, AgentAdamW(actor.net.params, torch.tensor([1e-2])), batch,
                        UpdateShape(1, 8, 8, False, "token-mean"), loss_mode="vanilla", policy_loss_kwargs=clip,
                        entropy_coeff=one * 0.0, use_kl_loss=False, kl_loss_coef=one * 0.0, kl_loss_type="k1",
                        grad_clip=torch.tensor([1e9]), generators=[torch.Generator().manual_seed(0)],
                        active=torch.tensor([True]), rollout_correction=rollout_correction)


def test_decoupled_weights_scale_the_update_loss():
    """On the on-policy shortcut the ratio is 1 and the loss is −mean(A): weights of 2 double it."""
    actor = _Actor()
    batch = _batch()
    with torch.no_grad():
        batch["old_log_probs"] = actor.log_prob_and_entropy(batch)[0]
    plain = _update(_Actor(), dict(batch))
    weighted = _update(_Actor(), {**batch, "rollout_is_weights": torch.full((1, 8, 1), 2.0)})
    torch.testing.assert_close(weighted["actor/pg_loss"][0], 2 * plain["actor/pg_loss"][0])
    torch.testing.assert_close(plain["actor/pg_loss"][0], -batch["advantages"].mean().view(1))


def test_bypass_update_trains_against_the_rollouts_log_probs_not_the_shortcut():
    actor = _Actor()
    batch = _batch()
    with torch.no_grad():
        current = actor.log_prob_and_entropy(batch)[0]
    batch["old_log_probs"] = current - 0.05  # the rollout's: off by a known shift
    metrics = _update(actor, batch, rollout_correction=_spec(bypass_mode=True))
    assert float(metrics["actor/ppo_kl"][0]) == pytest.approx(-0.05, abs=1e-6)  # the shortcut would give 0
    assert float(metrics["rollout_corr/kl"][0]) == pytest.approx(-0.05, abs=1e-6)
    assert float(metrics["rollout_corr/k3_kl"][0]) == pytest.approx(math.exp(0.05) - 0.05 - 1, rel=1e-4)
    # no old_log_prob pass measured it: the update does, under both of verl's names
    assert "actor/entropy_loss" in metrics and metrics["actor/entropy"] == metrics["actor/entropy_loss"]


# ---- the step ---------------------------------------------------------------------------------------------------
def _step_batch(shift=0.3):
    g = torch.Generator().manual_seed(0)
    old = -torch.rand(1, 4, 3, generator=g)
    mask = torch.ones(1, 4, 3)
    rollout = old.clone()
    rollout[0, 0, 0] -= shift  # one token the rollout found less likely: log r = +shift
    return {"old_log_probs": old, "rollout_log_probs": rollout, "response_mask": mask}


def _correction(**settings):
    return RolloutCorrection(_spec(**settings))


def test_off_without_the_rollouts_log_probs_does_nothing():
    batch = _step_batch()
    del batch["rollout_log_probs"]
    correction = _correction()
    assert not correction.spec.enabled and not correction.bypass_mode
    assert correction.apply(batch) == {} and set(batch) == {"old_log_probs", "response_mask"}


def test_off_with_the_rollouts_log_probs_logs_the_diagnostics_only():
    batch = _step_batch()
    metrics = _correction().apply(batch)
    assert "rollout_is_weights" not in batch and torch.equal(batch["response_mask"], torch.ones(1, 4, 3))
    assert float(metrics["rollout_corr/kl"][0]) == pytest.approx(-0.3 / 12, rel=1e-6)
    assert not any("rollout_is" in key or "rollout_rs" in key for key in metrics)


def test_decoupled_puts_the_weights_and_the_rejection_into_the_batch():
    batch = _step_batch(shift=1.0)
    metrics = _correction(rollout_is="token", rollout_rs="token_k1", rollout_rs_threshold="0.5_2.0").apply(batch)
    assert batch["rollout_is_weights"][0, 0, 0] == 2.0  # e^1 capped at 2
    assert batch["response_mask"][0, 0, 0] == 0 and batch["response_mask"].sum() == 11
    assert float(metrics["rollout_corr/rollout_rs_masked_fraction"][0]) == pytest.approx(1 / 12, rel=1e-6)


def test_a_correction_without_the_rollouts_log_probs_fails_clearly():
    batch = _step_batch()
    del batch["rollout_log_probs"]
    with pytest.raises(ValueError, match="calculate_log_probs=true"):
        _correction(rollout_is="token").apply(batch)
    with pytest.raises(ValueError, match="calculate_log_probs=true"):
        _correction(bypass_mode=True).apply_bypass_mode(batch)


def test_bypass_makes_the_rollouts_log_probs_the_old_ones_and_leaves_the_rest_to_the_loss():
    batch = _step_batch()
    correction = _correction(bypass_mode=True, loss_type="reinforce", rollout_is="sequence")
    correction.apply_bypass_mode(batch)
    assert batch["old_log_probs"] is batch["rollout_log_probs"]
    assert correction.apply(batch) == {}
    assert correction.spec == _spec(bypass_mode=True, loss_type="reinforce", rollout_is="sequence")
    expected = {**OFF, "rollout_is": "sequence"}
    del expected["bypass_mode"], expected["loss_type"]  # they pick the loss; the correction functions never see them
    assert correction.spec.correction_kwargs() == expected
