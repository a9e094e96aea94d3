import math

import pytest
import torch

from playground.step.optim import AgentAdamW, lr_factor, warmup_steps


def _loss(p, x):
    return (p * x).sum(-1).square().sum() + p.pow(3).sum()


@pytest.mark.parametrize("clip", [None, 0.5])
def test_matches_torch_adamw_with_clipping(clip):
    torch.manual_seed(0)
    ours_p = torch.randn(1, 10, requires_grad=True)
    ref_p = ours_p.detach().clone().requires_grad_(True)
    ours = AgentAdamW([ours_p], torch.tensor([1e-2]), eps=1e-5, weight_decay=0.01)
    ref = torch.optim.AdamW([ref_p], lr=1e-2, eps=1e-5, weight_decay=0.01)
    x = torch.randn(10)
    for _ in range(30):
        ours.zero_grad()
        ref.zero_grad()
        _loss(ours_p, x).backward()
        _loss(ref_p, x).backward()
        norm = ours.step(None if clip is None else torch.tensor([clip]))
        ref_norm = torch.nn.utils.clip_grad_norm_([ref_p], clip if clip else math.inf)
        ref.step()
        assert norm.item() == pytest.approx(ref_norm.item(), rel=1e-5)
    torch.testing.assert_close(ours_p, ref_p, rtol=1e-5, atol=1e-6)


def test_agents_are_independent_and_nan_agent_skips():
    torch.manual_seed(1)
    start = torch.randn(3, 6)
    p = start.clone().requires_grad_(True)
    opt = AgentAdamW([p], torch.tensor([1e-2, 1e-3, 1e-2]))
    solo = start[1:2].clone().requires_grad_(True)
    solo_opt = AgentAdamW([solo], torch.tensor([1e-3]))
    x = torch.randn(6)
    for _ in range(5):
        opt.zero_grad()
        solo_opt.zero_grad()
        loss = (p * x).sum(-1)
        loss = torch.stack([loss[0] * float("nan"), loss[1], loss[2]])  # agent 0 diverged
        loss.sum().backward()
        (solo * x).sum().backward()
        norm = opt.step(torch.tensor([1.0, 1.0, 1.0]))
        solo_opt.step(torch.tensor([1.0]))
        assert math.isnan(norm[0].item())
    torch.testing.assert_close(p[0], start[0])  # skipped every step: unchanged, as verl skips the step
    torch.testing.assert_close(p[1:2], solo)  # bit-for-bit the solo agent
    assert opt.step_count.tolist() == [0, 5, 5]


def test_inactive_agent_does_not_move():
    p = torch.ones(2, 3, requires_grad=True)
    opt = AgentAdamW([p], torch.tensor([0.1, 0.1]))
    p.sum().backward()
    opt.step(None, active=torch.tensor([True, False]))
    assert p[1].tolist() == [1.0, 1.0, 1.0] and p[0, 0].item() < 1.0


def test_unbatched_params_share_one_norm():
    a = torch.ones(2, requires_grad=True)
    b = torch.ones(3, requires_grad=True)
    opt = AgentAdamW([a, b], torch.tensor([0.1]), agent_dim=False)
    (3 * a.sum() + 4 * b[0]).backward()
    assert opt.step().item() == pytest.approx(math.sqrt(9 + 9 + 16))


def test_lr_schedules_as_verl():
    assert warmup_steps(-1, 0.1, 100) == 10 and warmup_steps(5, 0.1, 100) == 5 and warmup_steps(None, 0.0, 9) == 0
    assert lr_factor(0, 100, 10) == 0.0  # the first update has lr 0 during warm-up
    assert lr_factor(5, 100, 10) == pytest.approx(0.5)
    assert lr_factor(50, 100, 10) == 1.0
    # cosine, no warm-up: half-way through a half cycle -> 0.5 (min 0); end -> min_lr_ratio
    assert lr_factor(50, 100, 0, "cosine") == pytest.approx(0.5)
    assert lr_factor(100, 100, 0, "cosine", min_lr_ratio=0.1) == pytest.approx(0.1)
    assert lr_factor(25, 100, 0, "cosine", min_lr_ratio=0.2) == pytest.approx(0.6 + 0.4 * math.cos(math.pi / 4))
    with pytest.raises(ValueError, match="lr_scheduler_type"):
        lr_factor(60, 100, 10, "linear")
