import pytest
import torch

from playground.algos.dapo import filter_groups, filter_metric_values, overlong_penalty


def test_filter_groups_keeps_mixed_groups_and_singletons_in_first_appearance_order():
    # group 5: (1, 1, 1) all equal -> dropped; group 2: (0, 1) -> kept; group 9: one row -> kept (as verl);
    # group 7: (2, 2) -> dropped; group 0: (0.5, 0.25) -> kept. First appearances: 5, 2, 9, 7, 0.
    scores = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.5, 2.0, 2.0, 1.0, 0.5, 0.25])
    index = torch.tensor([5, 5, 2, 5, 9, 7, 7, 2, 0, 0])
    kept = filter_groups(scores, index)
    assert kept.groups.tolist() == [2, 9, 0]
    assert kept.rows.tolist() == [False, False, True, False, True, False, False, True, True, True]
    # the acc case: every group all-correct or all-wrong -> nothing left but the singleton
    acc = torch.tensor([1.0, 1.0, 0.0, 0.0, 1.0])
    assert filter_groups(acc, torch.tensor([0, 0, 1, 1, 2])).groups.tolist() == [2]


def test_filter_groups_exact_equality_and_shapes():
    # equal floats are dropped here (verl's np.std([0.1] * 3) = 1.4e-17 > 0 would keep them: see the docstring)
    assert filter_groups(torch.full((3,), 0.1), torch.zeros(3, dtype=torch.long)).groups.tolist() == []
    # the smallest difference counts
    tiny = torch.tensor([0.1, torch.nextafter(torch.tensor(0.1), torch.tensor(1.0)).item()])
    assert filter_groups(tiny, torch.tensor([4, 4])).groups.tolist() == [4]
    with pytest.raises(ValueError, match=r"\(bs,\)"):
        filter_groups(torch.zeros(2, 3), torch.zeros(3, dtype=torch.long))


def test_filter_metric_values():
    rewards = torch.tensor([[0.0, 1.0], [0.5, 0.0]])
    scores = torch.tensor([[0.0, 2.0], [0.0, 0.0]])
    batch = {"token_level_rewards": rewards, "token_level_scores": scores, "acc": torch.tensor([1.0, 0.0])}
    assert filter_metric_values("seq_final_reward", batch).tolist() == [1.0, 0.5]
    assert filter_metric_values("seq_reward", batch).tolist() == [2.0, 0.0]
    assert filter_metric_values("acc", batch).tolist() == [1.0, 0.0]
    with pytest.raises(KeyError, match="score"):
        filter_metric_values("score", batch)


def test_overlong_penalty_linear_ramp_over_the_buffer():
    # L_max 20, buffer 4 -> expected length 16. L = 10: exceed -6 -> +1.5 -> capped at 0; L = 16: 0;
    # L = 18: -(2 / 4)·1 = -0.5; L = 20: -(4 / 4)·1 = -1
    lengths = torch.tensor([10, 16, 18, 20])
    assert overlong_penalty(lengths, 20, 4, 1.0).tolist() == pytest.approx([0.0, 0.0, -0.5, -1.0])
    # penalty_factor 0.5 halves it; disabled gives zeros
    assert overlong_penalty(lengths, 20, 4, 0.5).tolist() == pytest.approx([0.0, 0.0, -0.25, -0.5])
    assert overlong_penalty(lengths, 20, 4, 1.0, enable=False).tolist() == [0.0] * 4
    # DAPO's paper setting: 16,384 expected + 4,096 buffer = 20,480; 18,432 tokens -> -0.5
    assert overlong_penalty(torch.tensor([18432]), 20480, 4096, 1.0).item() == pytest.approx(-0.5)


def test_overlong_penalty_two_agents_and_validation():
    # agent 0: buffer 4, factor 1 -> (0, -0.5, -1); agent 1: buffer 8 (expected 12), factor 2:
    # L = 16: -(4 / 8)·2 = -1; L = 18: -(6 / 8)·2 = -1.5; L = 20: -2
    lengths = torch.tensor([[16, 18, 20], [16, 18, 20]])
    buffers, factors = torch.tensor([[4.0], [8.0]]), torch.tensor([[1.0], [2.0]])
    batched = overlong_penalty(lengths, 20, buffers, factors)
    assert batched[0].tolist() == pytest.approx([0.0, -0.5, -1.0])
    assert batched[1].tolist() == pytest.approx([-1.0, -1.5, -2.0])
    for k, (b, f) in enumerate([(4, 1.0), (8, 2.0)]):
        assert batched[k].tolist() == overlong_penalty(lengths[k], 20, b, f).tolist()
    with pytest.raises(ValueError, match="> 0"):
        overlong_penalty(lengths, 20, 0, 1.0)
    with pytest.raises(ValueError, match=">="):
        overlong_penalty(lengths, 20, 32, 1.0)
