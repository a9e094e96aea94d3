"""Keeps `calibration.CALIBRATION` (and the guide values it checked) true: every gym entry is re-measured on five
healthy seeds of each gym task with a healthy run, trained as one batch per task (slow: about 90 s on one core)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from playground.diagnose.calibration import CALIBRATION, GUIDE_CHECKED
from playground.diagnose.catalogue import RULES_PATH
from playground.metrics import STEP
from playground.rundir.runs import read_metrics_jsonl

TASKS = ("cartpole", "acrobot", "pendulum")
SEEDS = (1, 2, 3, 4, 5)
RULES = {r["name"]: r for r in yaml.safe_load(RULES_PATH.read_text(encoding="utf-8"))["rules"]}


def windows(values: list, size: int) -> list[list]:
    return [values[i:i + size] for i in range(max(1, len(values) - size + 1))]


def critic_condition_share(records: list[dict], ev_bad: float) -> float:
    """The most of any 10-step window (after warm-up) where critic_undertrained's condition holds."""
    rule = RULES["critic_undertrained"]
    th = rule["thresholds"]
    held = []
    for r in records:
        if r[STEP] < rule["after_step"]:
            continue
        ev, ret = r["critic/vf_explained_var"], r["critic/returns/mean"]
        gap = abs(r["critic/values/mean"] - ret) / max(abs(ret), 0.2)  # rules.yaml: value_gap, floor 0.2
        held.append(ev < ev_bad or (ev < th["ev_low"] and gap > th["value_gap"]))
    return max(sum(w) / len(w) for w in windows(held, rule["window"]))


@pytest.fixture(scope="module")
def healthy(tmp_path_factory) -> dict[str, list[list[dict]]]:
    """task -> per seed, the records of a healthy run (steps >= 1)."""
    from playground.config import compose
    from playground.train import build_trainer, prepare

    out = {}
    for task in TASKS:
        cfgs = [compose([f"task={task}", "scenario=healthy", f"trainer.seed={s}", "trainer.logger=[]",
                         "trainer.progress_bar=false"]) for s in SEEDS]
        dirs = [tmp_path_factory.mktemp(f"{task}{s}") for s in SEEDS]
        build_trainer(cfgs, dirs, prepare(cfgs[0])).fit()
        out[task] = [[r for r in read_metrics_jsonl(Path(d) / "metrics.jsonl").records if r[STEP] >= 1]
                     for d in dirs]
    return out


def check_clipfrac_high(healthy, entry) -> None:
    kl_high = RULES["lr_too_high"]["thresholds"]["kl_high"]
    for task, runs in healthy.items():
        steps = [r for run in runs for r in run]
        assert max(r["actor/pg_clipfrac"] for r in steps) < entry.value, task
        assert not any(r["actor/pg_clipfrac"] > entry.value and abs(r["actor/ppo_kl"]) >= kl_high for r in steps)


def check_ev_bad(healthy, entry) -> None:
    rule_share = RULES["critic_undertrained"]["when"]["all"][0]["ge"]  # the share its EV condition needs
    for task, runs in healthy.items():
        assert max(critic_condition_share(run, entry.value) for run in runs) < rule_share, task
    # still needed: at the guide's value the condition fills a whole window of some healthy CartPole run
    assert max(critic_condition_share(run, entry.guide) for run in healthy["cartpole"]) >= rule_share


def check_kl_high(healthy, entry) -> None:
    for task, runs in healthy.items():
        assert max(abs(r["actor/ppo_kl"]) for run in runs for r in run) < entry.value, task


def check_kl_low(healthy, entry) -> None:
    targets = {"cartpole": 475.0, "acrobot": -100.0, "pendulum": -200.0}
    far = RULES["lr_too_low"]["thresholds"]["far_below"]
    for task, runs in healthy.items():
        target = targets[task]
        steps = [r for run in runs for r in run if "critic/score/mean" in r
                 and (target - r["critic/score/mean"]) / max(abs(target), 1) > far]
        share = sum(abs(r["actor/ppo_kl"]) < entry.value for r in steps) / max(1, len(steps))
        assert share < 0.3, (task, share)  # the rule needs 8 of 10 steps


def check_progress(healthy, entry) -> None:
    """Every healthy run's best score covers the whole way from its first score to its target (progress >= 1),
    far above lr_too_low_slow_progress's share."""
    targets = {"cartpole": 475.0, "acrobot": -100.0, "pendulum": -200.0}
    for task, runs in healthy.items():
        for run in runs:
            scores = [r["critic/score/mean"] for r in run if "critic/score/mean" in r]
            progress = (max(scores) - scores[0]) / (targets[task] - scores[0])
            assert progress >= 2 * entry.value, (task, progress)


CHECKS = {("lr_too_high", "clipfrac_high"): check_clipfrac_high, ("critic_undertrained", "ev_bad"): check_ev_bad,
          ("lr_too_high", "kl_high"): check_kl_high, ("lr_too_low", "kl_low"): check_kl_low,
          ("lr_too_low_slow_progress", "progress"): check_progress}
GYM = [e for e in (*CALIBRATION, *GUIDE_CHECKED) if e.family == "gym"]


def test_every_gym_entry_has_a_check_and_five_seeds():
    for entry in GYM:
        assert (entry.rule, entry.threshold) in CHECKS, entry
        assert entry.seeds >= len(SEEDS) and entry.healthy
        assert RULES[entry.rule]["thresholds"][entry.threshold] == entry.guide
    assert all(e.value == e.guide for e in GUIDE_CHECKED)


@pytest.mark.slow
@pytest.mark.parametrize("entry", GYM, ids=lambda e: f"{e.rule}.{e.threshold}")
def test_gym_entry_holds_on_healthy_runs(healthy, entry):
    CHECKS[(entry.rule, entry.threshold)](healthy, entry)
