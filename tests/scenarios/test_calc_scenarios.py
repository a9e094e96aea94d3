"""calc's scenarios: tool_skip_collapse, DAPO's overlong buffer sized for one-turn answers (verl's response length
counts the tool's reply), makes a right tool episode score below a wrong answer from the head, so GRPO learns to skip
the tool; the catalogue's fix (room for the reply) pays the tool again. CI checks that reward arithmetic on the real
reward code (< 1 s); the runs themselves (seed 101 of the panel, ~40 s each with the SFT base built) are `slow`."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf
from reports import report as _report
from reports import roots as _roots

from playground.config import compose
from playground.diagnose.catalogue import render_fix
from playground.failures import severity
from playground.run_spec import resolve_run
from playground.tasks.calc_data import CalcPrompts
from playground.tasks.token_reward import TokenReward

SCENARIO = ["task=calc", "scenario=tool_skip_collapse"]
SEED = 101


def _lengths() -> tuple[int, int]:
    """Response tokens of a right tool episode (call, reply, answer, EOS) and of an answer from the head (answer,
    EOS), for a 3-digit product."""
    tok = CalcPrompts.tokenizer
    call, reply, answer = (len(tok.encode(t)) for t in ("<tool>347*291</tool>", "<result>100977</result>",
                                                         "<answer>100977</answer>"))
    return call + reply + answer + 1, answer + 1


def _reward(cfg) -> TokenReward:
    spec = resolve_run([cfg], torch.device("cpu")).task
    return TokenReward(spec.reward, spec.max_response_length, torch.device("cpu"))


def _best(cfg) -> tuple[float, float]:
    """(a right tool episode's reward, the best a head answer can get: a right one) under the config's shaping."""
    reward = _reward(cfg)
    tool, head = _lengths()
    penalty = reward.penalty(torch.tensor([tool, head]))
    return 1.0 + float(penalty[0]), 1.0 + float(penalty[1])


def _worst_head(cfg) -> float:
    reward = _reward(cfg)
    return float(reward.penalty(torch.tensor([_lengths()[1]]))[0])


def test_the_buffer_makes_a_right_tool_episode_worth_less_than_a_wrong_head_answer():
    cfg = compose(SCENARIO)
    right_tool, _ = _best(cfg)
    assert right_tool < _worst_head(cfg) <= 0.0  # measured: 1 - 1.35 = -0.35 against -0.075


def test_the_catalogue_fix_pays_the_tool_again():
    fix = render_fix("tool_skip_collapse", "token", OmegaConf.to_container(compose(SCENARIO), resolve=True))
    assert fix == "data.max_response_length=48 actor_rollout_ref.model.block_size=60"
    right_tool, right_head = _best(compose([*SCENARIO, *fix.split()]))
    assert right_tool == 1.0 and right_head == 1.0  # no penalty on either: only the answer counts
    healthy_tool, _ = _best(compose(["task=calc"]))
    assert healthy_tool == 1.0


@pytest.mark.slow
def test_the_scenario_is_the_root_and_the_fix_clears_it(train_run):
    _, run_dir = train_run([*SCENARIO, f"trainer.seed={SEED}", "trainer.stop_on_finding=tool_skip_collapse"])
    assert "tool_skip_collapse" in _roots(run_dir)  # beside unstable_policy_loss on 2 of 10 panel seeds (101, 104)
    (fix,) = {f["fix"] for f in _report(run_dir)["findings"] if f["id"] == "tool_skip_collapse"}
    _, fixed = train_run([*SCENARIO, f"trainer.seed={SEED}", *fix.split()])
    assert [f["id"] for f in _report(fixed)["findings"] if severity(f["id"]) != "info"] == []


@pytest.mark.slow
def test_healthy_shows_no_warning(train_run):
    _, run_dir = train_run(["task=calc", f"trainer.seed={SEED}"])
    assert [f["id"] for f in _report(run_dir)["findings"] if severity(f["id"]) != "info"] == []
