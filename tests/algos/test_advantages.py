from collections import defaultdict

import pytest
import torch

from playground.algos.advantages import (
    ADV_ESTIMATORS,
    compute_gae_advantage_return,
    compute_grpo_outcome_advantage,
    compute_reinforce_plus_plus_outcome_advantage,
    compute_rloo_outcome_advantage,
    get_adv_estimator_fn,
    register_adv_est,
)
from playground.algos.masked import masked_whiten


def test_registry_names_and_errors():
    assert {"gae", "grpo", "rloo", "reinforce_plus_plus"} <= set(ADV_ESTIMATORS)
    with pytest.raises(ValueError, match="known"):
        get_adv_estimator_fn("nope")
    with pytest.raises(ValueError, match="already registered"):
        register_adv_est("gae")(lambda **kw: None)


def test_gae_hand_computed_no_bootstrap_past_mask_end():
    # One response of 2 valid tokens then padding; reward 1 on the last valid token.
    r = torch.tensor([[0.0, 1.0, 0.0]])
    v = torch.tensor([[0.5, 0.2, 9.0]])  # the padded value (9.0) must never be bootstrapped
    m = torch.tensor([[1.0, 1.0, 0.0]])
    gamma, lam = 0.9, 0.8
    adv, ret = compute_gae_advantage_return(r, v, m, gamma, lam, norm_adv=False)
    # t=2 masked: delta = 0 + 0.9*0 - 9 = -9 -> g_ = -9, but the carried lastgaelam stays 0 (masked)
    # t=1: delta = 1 + 0.9*0 - 0.2 = 0.8 -> g = 0.8
    # t=0: delta = 0 + 0.9*0.2 - 0.5 = -0.32 -> g = -0.32 + 0.9*0.8*0.8 = 0.256
    assert adv[0, :2].tolist() == pytest.approx([0.256, 0.8])
    assert adv[0, 2].item() == pytest.approx(0.0)  # verl stores the carried (masked) value
    assert ret[0, :2].tolist() == pytest.approx([0.756, 1.0])  # returns = raw GAE + values


def test_gae_whitens_over_the_batch():
    r = torch.tensor([[0.0, 1.0], [0.0, 0.0]])
    v = torch.tensor([[0.1, 0.3], [0.2, 0.4]])
    m = torch.ones(2, 2)
    raw, ret = compute_gae_advantage_return(r, v, m, 1.0, 1.0, norm_adv=False)
    adv, ret2 = compute_gae_advantage_return(r, v, m, 1.0, 1.0)
    torch.testing.assert_close(adv, masked_whiten(raw, m))
    torch.testing.assert_close(ret, ret2)
    # gamma = lam = 1: g_t = (sum of future rewards) - V_t
    torch.testing.assert_close(raw, torch.tensor([[0.9, 0.7], [-0.2, -0.4]]))


def test_gae_gym_form_terminal_vs_truncation():
    # Row: steps 0,1 are one episode that ends at step 1; steps 2 starts the next one, cut by the rollout.
    r = torch.tensor([[1.0, 1.0, 1.0]])
    v = torch.tensor([[2.0, 1.5, 3.0]])
    dones = torch.tensor([[False, True, False]])
    m = torch.ones(1, 3)
    gamma, lam = 0.5, 1.0
    # Termination at t=1: no bootstrap (next value 0).
    terminal_next = torch.tensor([[1.5, 0.0, 4.0]])
    adv, _ = compute_gae_advantage_return(r, v, m, gamma, lam, next_values=terminal_next, dones=dones, norm_adv=False)
    # t=2: 1 + 0.5*4 - 3 = 0; t=1: 1 + 0 - 1.5 = -0.5 (recursion cut by done); t=0: 1 + 0.75 - 2 + 0.5*(-0.5)
    assert adv[0].tolist() == pytest.approx([-0.5, -0.5, 0.0])
    # Truncation at t=1: bootstrap from the final observation's value (say 6.0), recursion still cut.
    trunc_next = torch.tensor([[1.5, 6.0, 4.0]])
    adv, ret = compute_gae_advantage_return(r, v, m, gamma, lam, next_values=trunc_next, dones=dones, norm_adv=False)
    assert adv[0].tolist() == pytest.approx([-0.25 + 0.5 * 2.5, 2.5, 0.0])
    assert ret[0].tolist() == pytest.approx([3.0, 4.0, 3.0])


def test_gae_per_agent_gamma_tensor():
    r = torch.tensor([[0.0, 1.0]])
    v = torch.zeros(1, 2)
    m = torch.ones(1, 2)
    batched = compute_gae_advantage_return(
        torch.stack([r, r]), torch.stack([v, v]), torch.stack([m, m]),
        torch.tensor([0.5, 1.0]).view(2, 1, 1), 1.0, norm_adv=False)[0]
    assert batched[0, 0].tolist() == pytest.approx([0.5, 1.0])
    assert batched[1, 0].tolist() == pytest.approx([1.0, 1.0])


def _verl_grpo_reference(scores, index, eps=1e-6, norm=True):
    """A literal transcription of verl's dict-based loop, to check the vectorised version against."""
    groups = defaultdict(list)
    for i, s in enumerate(scores):
        groups[index[i]].append(s)
    out = []
    for i, s in enumerate(scores):
        g = torch.tensor(groups[index[i]])
        mean, std = (torch.tensor(0.0), torch.tensor(1.0)) if len(g) == 1 else (g.mean(), g.std())
        out.append(((s - mean) / (std + eps)) if norm else (s - mean))
    return torch.stack(out)


def test_grpo_hand_computed_and_edge_cases():
    # prompt 0: scores 1, 0, 0 ; prompt 1: scores 1, 1 (all equal) ; prompt 2: single sample score 0.5
    scores = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 0.5])
    index = torch.tensor([0, 0, 0, 1, 1, 2])
    rewards = torch.zeros(6, 3)
    rewards[:, 1] = scores
    mask = torch.tensor([[1.0, 1.0, 0.0]] * 6)
    adv, ret = compute_grpo_outcome_advantage(rewards, mask, index)
    torch.testing.assert_close(adv, ret)
    # group 0: mean 1/3, unbiased std sqrt(1/3) -> (1 - 1/3)/sqrt(1/3) = 1.1547
    assert adv[0, 0].item() == pytest.approx((2 / 3) / ((1 / 3) ** 0.5 + 1e-6), rel=1e-5)
    assert adv[1, 1].item() == pytest.approx((-1 / 3) / ((1 / 3) ** 0.5 + 1e-6), rel=1e-5)
    assert adv[3].abs().max().item() == 0.0 and adv[4].abs().max().item() == 0.0  # all-equal group -> 0
    assert adv[5, 0].item() == pytest.approx(0.5 / (1 + 1e-6))  # group of one: mean 0, std 1
    assert adv[:, 2].abs().max().item() == 0.0  # masked tokens carry no advantage
    torch.testing.assert_close(adv[:, 0], _verl_grpo_reference(scores, index.tolist()))
    dr, _ = compute_grpo_outcome_advantage(rewards, mask, index, norm_adv_by_std_in_grpo=False)
    torch.testing.assert_close(dr[:, 0], _verl_grpo_reference(scores, index.tolist(), norm=False))


def test_grpo_random_matches_verl_loop():
    g = torch.Generator().manual_seed(0)
    scores = torch.rand(20, generator=g)
    index = torch.randint(0, 6, (20,), generator=g)
    rewards = torch.zeros(20, 4)
    rewards[:, -1] = scores
    adv, _ = compute_grpo_outcome_advantage(rewards, torch.ones(20, 4), index)
    torch.testing.assert_close(adv[:, 0], _verl_grpo_reference(scores, index.tolist()), rtol=1e-5, atol=1e-6)


def test_rloo_leave_one_out():
    scores = torch.tensor([1.0, 0.0, 0.0, 3.0])
    index = torch.tensor([7, 7, 7, 9])
    rewards = scores.unsqueeze(-1)
    adv, _ = compute_rloo_outcome_advantage(rewards, torch.ones(4, 1), index)
    # sample 0: 1 - mean(0, 0) = 1; samples 1, 2: 0 - mean(1, 0) = -0.5; group of one keeps its score
    assert adv[:, 0].tolist() == pytest.approx([1.0, -0.5, -0.5, 3.0])


def test_reinforce_plus_plus_discounted_return_reset_after_eos():
    r = torch.tensor([[0.0, 0.0, 1.0, 5.0], [0.0, 2.0, 0.0, 0.0]])
    m = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    adv, ret = compute_reinforce_plus_plus_outcome_advantage(r, m, gamma=0.5)
    # row 0: G2 = 1, G1 = 0.5, G0 = 0.25 (the 5.0 after EOS is at a masked position: G3 = 5 but reset)
    assert ret[0, :3].tolist() == pytest.approx([0.25, 0.5, 1.0])
    assert ret[1, :2].tolist() == pytest.approx([1.0, 2.0])
    torch.testing.assert_close(adv, masked_whiten(ret, m) * m)
