"""The outcome estimators verl registers beyond gae/grpo/rloo/reinforce_plus_plus, against hand-computed values."""

import math

import pytest
import torch

from playground.algos.advantages import (
    ADV_ESTIMATORS,
    compute_gpg_outcome_advantage,
    compute_grpo_passk_outcome_advantage,
    compute_opo_outcome_advantage,
    compute_reinforce_plus_plus_baseline_outcome_advantage,
    compute_remax_outcome_advantage,
    get_adv_estimator_fn,
)

NAMES = {"reinforce_plus_plus_baseline": compute_reinforce_plus_plus_baseline_outcome_advantage,
         "remax": compute_remax_outcome_advantage, "opo": compute_opo_outcome_advantage,
         "gpg": compute_gpg_outcome_advantage, "grpo_passk": compute_grpo_passk_outcome_advantage}


def _outcome(scores, width=2):
    """Rewards `(*, bs, width)` with each row's score on its first token (any token: estimators use the row sum)."""
    rewards = torch.zeros(*scores.shape, width)
    rewards[..., 0] = scores
    return rewards


def _assert_slices(batched, solo):
    for k, (adv, ret) in enumerate(solo):
        torch.testing.assert_close(batched[0][k], adv)
        torch.testing.assert_close(batched[1][k], ret)


def test_registered_under_verl_names_and_ignore_extra_keywords():
    for name, fn in NAMES.items():
        assert get_adv_estimator_fn(name) is fn
    assert set(NAMES) <= set(ADV_ESTIMATORS)
    # The trainer's call site has values/gamma/lam/norm_adv for every estimator; the registry picks each one's own.
    rewards, mask, index = _outcome(torch.tensor([1.0, 0.0])), torch.ones(2, 2), torch.tensor([0, 0])
    offered = dict(token_level_rewards=rewards, response_mask=mask, index=index, values=None, gamma=1.0, lam=1.0,
                   norm_adv=True, norm_adv_by_std_in_grpo=True, reward_baselines=torch.zeros(2))
    for name in NAMES:
        adv, ret = get_adv_estimator_fn(name)(**ADV_ESTIMATORS.select(name, offered))
        assert adv.shape == ret.shape == (2, 2)


@pytest.mark.parametrize("name", sorted(NAMES) + ["gae"])
def test_a_misspelt_keyword_raises(name):
    rewards, mask = _outcome(torch.tensor([1.0, 0.0])), torch.ones(2, 2)
    with pytest.raises(TypeError):
        get_adv_estimator_fn(name)(token_level_rewards=rewards, response_mask=mask, index=torch.tensor([0, 0]),
                                   values=torch.zeros(2, 2), gamma=1.0, lam=1.0, reward_baselines=torch.zeros(2),
                                   gama=0.9)
    with pytest.raises(TypeError, match="gama"):
        ADV_ESTIMATORS.select(name, {"gama": 0.9})


def test_the_registry_refuses_a_function_that_swallows_keywords():
    from playground.algos.registry import Registry

    registry = Registry("algorithm.adv_estimator", ["x"], ["token_level_rewards"])
    with pytest.raises(TypeError, match="only the keywords it reads"):
        registry.register("x")(lambda token_level_rewards, **_: None)
    with pytest.raises(TypeError, match="no caller offers"):
        registry.register("x")(lambda token_level_reward: None)


def test_reinforce_plus_plus_baseline_group_centred_then_batch_whitened():
    # group 0 scores (1, 0, 0): mean 1/3 -> (2/3, -1/3, -1/3); group 1 is one row, score 2: mean 0 -> 2.
    # Broadcast over the valid tokens (row 1 has one): values 2/3, 2/3, -1/3, -1/3, -1/3, 2, 2 (7 tokens).
    # Mean 13/21; deviations 1/21 (x2), -20/21 (x3), 29/21 (x2); unbiased var = (2 + 1200 + 1682)/441/6 = 1.089947
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0], [1.0, 1.0], [1.0, 1.0]])
    index = torch.tensor([0, 0, 0, 1])
    adv, ret = compute_reinforce_plus_plus_baseline_outcome_advantage(
        _outcome(torch.tensor([1.0, 0.0, 0.0, 2.0])), mask, index)
    sd = math.sqrt(2884 / 441 / 6 + 1e-8)
    expected = torch.tensor([[1, 1], [-20, 0], [-20, -20], [29, 29]]) / 21 / sd
    torch.testing.assert_close(adv, expected.float())
    assert ret is adv
    # Two agents with different scores: each agent is whitened over its own tokens.
    scores2 = torch.tensor([[1.0, 0.0, 0.0, 2.0], [0.0, 0.0, 3.0, -1.0]])
    masks = torch.stack([mask, mask])
    batched = compute_reinforce_plus_plus_baseline_outcome_advantage(_outcome(scores2), masks, index)
    _assert_slices(batched, [compute_reinforce_plus_plus_baseline_outcome_advantage(_outcome(s), mask, index)
                             for s in scores2])


def test_remax_reverse_cumsum_minus_greedy_baseline():
    # row 0: rewards (0, 1, [pad 0]); returns (1, 1, 0); baseline 0.4 -> (0.6, 0.6, 0)
    # row 1: rewards (0.5, 0, [pad 7: masked out]); returns (0.5, 0, 0); baseline 1 -> (-0.5, -1, 0)
    rewards = torch.tensor([[0.0, 1.0, 0.0], [0.5, 0.0, 7.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    adv, ret = compute_remax_outcome_advantage(rewards, mask, reward_baselines=torch.tensor([0.4, 1.0]))
    torch.testing.assert_close(ret, torch.tensor([[1.0, 1.0, 0.0], [0.5, 0.0, 0.0]]))
    torch.testing.assert_close(adv, torch.tensor([[0.6, 0.6, 0.0], [-0.5, -1.0, 0.0]]))
    # Two agents, baselines (K, bs): agent 1's greedy rewards (0, 2) -> (1, 1, 0), (-1.5, -2, 0)
    baselines = torch.tensor([[0.4, 1.0], [0.0, 2.0]])
    batched = compute_remax_outcome_advantage(torch.stack([rewards] * 2), torch.stack([mask] * 2),
                                              reward_baselines=baselines)
    torch.testing.assert_close(batched[0][1], torch.tensor([[1.0, 1.0, 0.0], [-1.5, -2.0, 0.0]]))
    _assert_slices(batched, [compute_remax_outcome_advantage(rewards, mask, reward_baselines=b) for b in baselines])
    with pytest.raises(ValueError, match="reward_baselines"):
        compute_remax_outcome_advantage(rewards, mask)


def test_opo_length_weighted_baseline():
    # group 0: scores (1, 0, 1), lengths (2, 4, 1): b = (2·1 + 4·0 + 1·1) / 7 = 3/7 -> (4/7, -3/7, 4/7)
    # group 1: one row, score 0.5: b = 0 -> 0.5
    mask = torch.tensor([[1.0, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 1, 0]])
    index = torch.tensor([3, 3, 3, 8])
    adv, ret = compute_opo_outcome_advantage(_outcome(torch.tensor([1.0, 0.0, 1.0, 0.5]), 4), mask, index)
    torch.testing.assert_close(adv, torch.tensor([4 / 7, -3 / 7, 4 / 7, 0.5]).unsqueeze(-1) * mask)
    assert ret is adv
    # A plain group mean would be 2/3: the long wrong answer pulls the baseline down.
    scores2 = torch.tensor([[1.0, 0.0, 1.0, 0.5], [0.0, 1.0, 1.0, -1.0]])
    masks = torch.stack([mask, mask])
    batched = compute_opo_outcome_advantage(_outcome(scores2, 4), masks, index)
    # agent 1, group 0: b = (0 + 4 + 1) / 7 = 5/7 -> (-5/7, 2/7, 2/7); group 1: -1
    torch.testing.assert_close(batched[0][1, :, 0], torch.tensor([-5 / 7, 2 / 7, 2 / 7, -1.0]))
    _assert_slices(batched, [compute_opo_outcome_advantage(_outcome(s, 4), mask, index) for s in scores2])


def test_gpg_alpha_rescales_by_rows_with_a_reward():
    # scores (1, 0, 0 | 0): one nonzero of 4 -> alpha = 4; group 0 mean 1/3 -> 4·(2/3, -1/3, -1/3); the group of
    # one has mean 0 -> 4·0 = 0. No std division.
    index = torch.tensor([0, 0, 0, 1])
    mask = torch.ones(4, 2)
    adv, ret = compute_gpg_outcome_advantage(_outcome(torch.tensor([1.0, 0.0, 0.0, 0.0])), mask, index)
    torch.testing.assert_close(adv[:, 0], torch.tensor([8 / 3, -4 / 3, -4 / 3, 0.0]))
    assert ret is adv
    # Two agents, f_norm (1, 2): agent 1 scores (1, 1, 0 | 0.5): 3 nonzero -> alpha 4/3; group 0 mean 2/3 ->
    # (1/3, 1/3, -2/3)·4/3 / 2 = (2/9, 2/9, -4/9); the single row 0.5·4/3 / 2 = 1/3.
    scores2 = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.5]])
    f_norm = torch.tensor([1.0, 2.0]).view(2, 1, 1)
    batched = compute_gpg_outcome_advantage(_outcome(scores2), torch.stack([mask, mask]), index, f_norm=f_norm)
    torch.testing.assert_close(batched[0][1, :, 0], torch.tensor([2 / 9, 2 / 9, -4 / 9, 1 / 3]))
    _assert_slices(batched, [compute_gpg_outcome_advantage(_outcome(s), mask, index, f_norm=f)
                             for s, f in zip(scores2, [1.0, 2.0])])
    # all scores zero: alpha = 4 / max(0, 1), advantages 0
    zero, _ = compute_gpg_outcome_advantage(_outcome(torch.zeros(4)), mask, index)
    assert zero.abs().max().item() == 0.0


def test_grpo_passk_only_the_best_gets_the_margin():
    # group 4: scores (0.2, 1.0, 0.5): best row 1, margin 1.0 - 0.5 = 0.5; unbiased std: mean 17/30,
    # squared deviations (11/30)^2 + (13/30)^2 + (2/30)^2 = 294/900 -> var 0.163333, std 0.404145
    # group 1: (1, 1): a tie for best -> margin 0 for both
    scores = torch.tensor([0.2, 1.0, 0.5, 1.0, 1.0])
    index = torch.tensor([4, 4, 4, 1, 1])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0]])
    std = math.sqrt(294 / 900 / 2)
    adv, ret = compute_grpo_passk_outcome_advantage(_outcome(scores), mask, index)
    torch.testing.assert_close(adv, torch.tensor([[0, 0], [0.5 / (std + 1e-6), 0], [0, 0], [0, 0], [0, 0]]))
    assert ret is adv
    raw, _ = compute_grpo_passk_outcome_advantage(_outcome(scores), mask, index, norm_adv_by_std_in_grpo=False)
    assert raw[:, 0].tolist() == pytest.approx([0.0, 0.5, 0.0, 0.0, 0.0])
    # Two agents: agent 1's best in group 4 is row 0 (0.9 over 0.3); group 1 (0, 2): row 4 gets 2.
    scores2 = torch.stack([scores, torch.tensor([0.9, 0.3, 0.3, 0.0, 2.0])])
    batched = compute_grpo_passk_outcome_advantage(_outcome(scores2), torch.stack([mask, mask]), index,
                                                   norm_adv_by_std_in_grpo=False)
    assert batched[0][1, :, 0].tolist() == pytest.approx([0.6, 0.0, 0.0, 0.0, 2.0])
    _assert_slices(batched, [compute_grpo_passk_outcome_advantage(_outcome(s), mask, index,
                                                                  norm_adv_by_std_in_grpo=False) for s in scores2])
    with pytest.raises(ValueError, match="at least 2"):
        compute_grpo_passk_outcome_advantage(_outcome(torch.tensor([1.0, 0.0, 1.0])), torch.ones(3, 2),
                                             torch.tensor([0, 0, 1]))
