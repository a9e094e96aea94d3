import math

import pytest
import torch

from playground.algos.masked import entropy_from_logits, masked_mean, masked_var, masked_whiten

X = torch.tensor([[1.0, 2.0, 3.0], [4.0, float("nan"), 6.0]])
M = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0]])


def test_masked_mean_ignores_nan_outside_mask():
    # valid: 1, 2, 4, 6 -> 13 / 4
    assert masked_mean(X, M).item() == pytest.approx(13 / 4)


def test_masked_var_is_unbiased():
    # values 1, 2, 4, 6: mean 3.25, squared deviations 5.0625 + 1.5625 + 0.5625 + 7.5625 = 14.75; / 3
    assert masked_var(X, M).item() == pytest.approx(14.75 / 3)


def test_masked_var_refuses_fewer_than_two_elements():
    with pytest.raises(ValueError, match="one"):
        masked_var(X, torch.tensor([[1.0, 0, 0], [0, 0, 0]]))
    with pytest.raises(ValueError, match="At least one"):
        masked_var(X, torch.zeros(2, 3))


def test_masked_whiten_zero_mean_unit_var_over_valid_tokens():
    w = masked_whiten(X, M)
    assert masked_mean(w, M).item() == pytest.approx(0.0, abs=1e-6)
    assert masked_var(w, M).item() == pytest.approx(1.0, rel=1e-5)
    assert w[0, 0].item() == pytest.approx((1 - 3.25) / math.sqrt(14.75 / 3 + 1e-8), rel=1e-6)


def test_leading_agent_dim_reduces_per_agent():
    stacked = torch.stack([X, X * 2])  # (K=2, bs, T)
    masks = torch.stack([M, M])
    means = masked_mean(stacked, masks)
    assert means.shape == (2,)
    assert means.tolist() == pytest.approx([13 / 4, 13 / 2])
    w = masked_whiten(stacked, masks)
    torch.testing.assert_close(w[0], masked_whiten(X, M), equal_nan=True)  # NaN stays at its masked slot
    torch.testing.assert_close(w[1], masked_whiten(X * 2, M), equal_nan=True)


def test_entropy_from_logits():
    # uniform over 4 -> ln 4; one-hot-ish -> ~0
    logits = torch.tensor([[0.0, 0.0, 0.0, 0.0], [100.0, 0.0, 0.0, 0.0]])
    ent = entropy_from_logits(logits)
    assert ent[0].item() == pytest.approx(math.log(4))
    assert ent[1].item() == pytest.approx(0.0, abs=1e-6)
    # two actions with p = (0.25, 0.75): -(0.25 ln 0.25 + 0.75 ln 0.75)
    two = torch.log(torch.tensor([0.25, 0.75]))
    assert entropy_from_logits(two).item() == pytest.approx(-(0.25 * math.log(0.25) + 0.75 * math.log(0.75)))
