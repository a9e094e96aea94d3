"""verl's clip range: a bound left None is `clip_ratio`, a set one is its own, whatever the values are."""

import torch

from playground.algos.clip_range import resolve_clip_range


def test_a_bound_left_none_is_clip_ratio():
    assert resolve_clip_range(0.2, None, None) == (0.2, 0.2)
    assert resolve_clip_range(0.2, 0.1, None) == (0.1, 0.2)
    assert resolve_clip_range(0.2, None, 0.28) == (0.2, 0.28)


def test_a_zero_bound_is_a_bound_not_a_null():
    assert resolve_clip_range(0.2, 0.0, 0.0) == (0.0, 0.0)


def test_tensors_pass_through_untouched():
    eps, high = torch.tensor([0.2]), torch.tensor([0.3])
    low_out, high_out = resolve_clip_range(eps, None, high)
    assert low_out is eps and high_out is high
