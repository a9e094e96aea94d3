"""Group statistics: RAGEN's within-group reward spread, by hand."""

from __future__ import annotations

import pytest
import torch

from playground.algos.group_stats import group_reward_std


def test_group_reward_std_by_hand():
    # groups: {1, 0} std sqrt(0.5); {1, 1, 1} std 0; {3} alone: no spread. Each group weighs 1: sqrt(0.5) / 3
    scores = torch.tensor([1.0, 0.0, 1.0, 1.0, 1.0, 3.0], dtype=torch.float64)
    index = torch.tensor([0, 0, 1, 1, 1, 2])
    assert float(group_reward_std(scores, index)) == pytest.approx(0.5 ** 0.5 / 3)
    lead = torch.stack([scores, torch.zeros(6, dtype=torch.float64)])  # (agents, rows): one spread per agent
    assert group_reward_std(lead, index).tolist() == pytest.approx([0.5 ** 0.5 / 3, 0.0])
