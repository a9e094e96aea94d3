"""countdown's scenarios. reward_hacking: TinyZero's format score set above a right answer's, so a short well-formed
wrong equation pays more than a right one; the training reward rises while val/accuracy falls. critic_undertrained:
PPO with a critic at the guide's example-3 lr (1e-5), whose values never reach the returns' level. The runs need
countdown's SFT base (~640 s of CPU to build, then cached), so they are `slow`. entropy_collapse: RL on 16 prompts
with four updates a step, which sharpens onto the routes it already takes.

CI trains each scenario once (seed 101, stopped at its finding) and the healthy run once on a shorter base: the same SFT
recipe cut to 1,000 steps, its cosine schedule with it (`playground.bases.COUNTDOWN_CI_BASE`; 160 s of CPU to build,
greedy 0.21 against the full base's 0.56), shipped in bases/ like the others, so no test waits on a build. Measured on
seeds 101 and 102 (docs/tuning.md, "countdown in CI"): every scenario reaches its signature there too. CI also checks
the configs, the reward arithmetic that makes the hack pay, and each rule on the metrics of a full run
(tests/diagnose/test_reward_hacking.py, tests/diagnose/test_critic_undertrained_value.py,
tests/diagnose/test_entropy_collapse_narrowing.py)."""

from __future__ import annotations

import pytest
from reports import assert_root_and_stop
from reports import report as _report
from reports import roots as _roots
from reports import warnings as _warnings

from playground.bases import COUNTDOWN_CI_BASE as CI_BASE
from playground.config import compose, scenarios_of
from playground.rundir.runs import read_run_info
from playground.tasks.countdown_reward import score

SCENARIO = ["task=countdown", "scenario=reward_hacking"]
SEED = 101
CI_SCENARIOS = [s for s in scenarios_of("countdown") if s != "healthy"]
GT = "3,7,8>53"
RIGHT = "<think>8*7=56,56-3=53</think><answer>(8*7)-3</answer>"
GUESS = "<think></think><answer>3+7+8</answer>"  # well-formed, wrong, and short


def test_healthy_shows_no_warning_on_the_ci_base(train_run):
    _, run_dir = train_run(["task=countdown", f"trainer.seed={SEED}", *CI_BASE])
    assert read_run_info(run_dir)["sft_steps"] == 1000
    assert _warnings(run_dir) == []


@pytest.mark.parametrize("scenario", CI_SCENARIOS)
def test_scenario_reaches_its_signature_on_the_ci_base(scenario, train_run):
    _, run_dir = train_run(["task=countdown", f"scenario={scenario}", f"trainer.seed={SEED}",
                            f"trainer.stop_on_finding={scenario}", *CI_BASE])
    assert_root_and_stop(run_dir, scenario)


def test_the_scenario_is_the_healthy_run_with_a_format_score_above_a_right_answers():
    healthy, hacked = compose(["task=countdown"]), compose(SCENARIO)
    assert hacked.reward.format_score > 1.0 > healthy.reward.format_score
    # everything the policy's step depends on is the healthy run's: the cause is the reward, not the lr
    assert hacked.actor_rollout_ref.actor == healthy.actor_rollout_ref.actor
    assert hacked.algorithm == healthy.algorithm and hacked.data == healthy.data


def test_under_the_scenarios_reward_a_guess_beats_a_right_answer():
    hacked = compose(SCENARIO).reward.format_score
    assert score(GUESS, GT, format_score=hacked)["score"] > score(RIGHT, GT, format_score=hacked)["score"] == 1.0
    healthy = compose(["task=countdown"]).reward.format_score
    assert score(GUESS, GT, format_score=healthy)["score"] < score(RIGHT, GT, format_score=healthy)["score"]


@pytest.mark.slow
def test_the_hack_emerges_and_the_catalogue_fix_clears_it(train_run):
    _, run_dir = train_run([*SCENARIO, f"trainer.seed={SEED}"])
    roots = _roots(run_dir)
    assert "reward_hacking" in roots, _warnings(run_dir)
    (fix,) = {f["fix"] for f in _report(run_dir)["findings"] if f["id"] == "reward_hacking"}
    assert fix == "reward.format_score=0.1"
    _, fixed = train_run([*SCENARIO, f"trainer.seed={SEED}", *fix.split()])
    assert _warnings(fixed) == []


def test_the_critic_scenario_is_ppo_with_the_guides_critic_lr():
    healthy, starved = compose(["task=countdown"]), compose(["task=countdown", "scenario=critic_undertrained"])
    assert starved.algorithm.adv_estimator == "gae" and starved.algorithm.lam == starved.algorithm.gamma == 1.0
    assert starved.critic.optim.lr == pytest.approx(healthy.critic.optim.lr / 100)
    assert starved.actor_rollout_ref.actor == healthy.actor_rollout_ref.actor


@pytest.mark.slow
def test_the_undertrained_critic_is_found_and_the_catalogue_fix_clears_it(train_run):
    scenario = ["task=countdown", "scenario=critic_undertrained", f"trainer.seed={SEED}"]
    _, run_dir = train_run(scenario)
    roots = _roots(run_dir)
    assert "critic_undertrained" in roots, _warnings(run_dir)
    (fix,) = {f["fix"] for f in _report(run_dir)["findings"] if f["id"] == "critic_undertrained"}
    _, fixed = train_run([*scenario, *fix.split()])
    assert _warnings(fixed) == []


@pytest.mark.slow
def test_healthy_shows_no_warning(train_run):
    _, run_dir = train_run(["task=countdown", f"trainer.seed={SEED}"])
    assert _warnings(run_dir) == []


def test_the_collapse_scenario_is_the_healthy_run_on_sixteen_prompts_with_four_updates_a_step():
    healthy, narrow = compose(["task=countdown"]), compose(["task=countdown", "scenario=entropy_collapse"])
    assert healthy.data.train_max_samples == -1 and narrow.data.train_max_samples == 16
    assert narrow.data.train_batch_size == 16 == 4 * narrow.actor_rollout_ref.actor.ppo_mini_batch_size
    # no knob that sharpens by itself: the lr, the entropy bonus, the clip and the temperature are the healthy run's
    for key in ("optim", "entropy_coeff", "clip_ratio_low", "clip_ratio_high", "ppo_epochs", "loss_agg_mode"):
        assert narrow.actor_rollout_ref.actor[key] == healthy.actor_rollout_ref.actor[key], key
    assert narrow.actor_rollout_ref.rollout == healthy.actor_rollout_ref.rollout
    assert narrow.algorithm == healthy.algorithm


@pytest.mark.slow
def test_the_collapse_emerges_on_the_full_base_and_every_prompt_clears_it(train_run):
    scenario = ["task=countdown", "scenario=entropy_collapse", f"trainer.seed={SEED}"]
    _, run_dir = train_run(scenario)
    assert "entropy_collapse" in _roots(run_dir), _warnings(run_dir)
    _, fixed = train_run([*scenario, "data.train_max_samples=-1"])
    assert "entropy_collapse" not in _warnings(fixed)


def _length_bias_overrides() -> list[str]:
    """`+sweep=length_bias`'s settings (its base with re-checks, lr, steps) as overrides, without its sweep."""
    from pathlib import Path

    from omegaconf import OmegaConf

    from playground.batched import leaf_values
    from playground.config import CONF_DIR

    sweep = OmegaConf.load(Path(CONF_DIR) / "sweep" / "length_bias.yaml")
    sweep.pop("defaults")  # leaf_values drops the `hydra` node
    return ["task=countdown", *(f"{key}={value}" for key, value in leaf_values(sweep).items())]


def _wrong_answers_growth(run_dir) -> tuple[float, float]:
    """How far the wrong answers' mean length rises above its first 10 steps' (the highest 10-step window's mean less
    the first's), and the highest 10-step window's share of them cut at the cap."""
    from playground.rundir.runs import read_metrics_jsonl

    rows = [r for r in read_metrics_jsonl(run_dir / "metrics.jsonl").records if "response_length/incorrect/mean" in r]

    def windows(key):
        return [sum(r.get(key, 0.0) for r in rows[i:i + 10]) / len(rows[i:i + 10]) for i in range(0, len(rows), 10)]

    lengths = windows("response_length/incorrect/mean")
    return max(lengths) - lengths[0], max(windows("response_length/incorrect/clip_ratio"))


@pytest.mark.slow
def test_wrong_answers_grow_under_grpos_aggregation_and_not_under_dr_grpo(train_run):
    """The sweep's two ends on one panel seed. Seeds 101-110 (docs/tuning.md, "Length dynamics on countdown"): under
    seq-mean-token-mean the wrong answers rise by 10.1-16.2 tokens with 0.16-0.38 of them truncated at the worst
    10 steps; under Dr. GRPO by 0.0-5.1 tokens with at most 0.08 truncated."""
    common = [*_length_bias_overrides(), f"trainer.seed={SEED}"]
    _, biased = train_run([*common, "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean"])
    _, unbiased = train_run([*common, "+preset=dr_grpo"])
    (grows, cut), (dr_grows, dr_cut) = _wrong_answers_growth(biased), _wrong_answers_growth(unbiased)
    assert grows >= 8 and cut >= 0.12, (grows, cut)
    assert dr_grows <= 6 and dr_cut <= 0.1, (dr_grows, dr_cut)
