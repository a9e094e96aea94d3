"""Tests for `playground/diagnose/injected.py`: a finding names the playground knob that broke its run apart from the
fix, with what it stands for in a verl run, and the fix as the lever a verl user has (en and zh, text and Markdown)."""

from __future__ import annotations

import pytest

from playground.config import PLAYGROUND_KEYS, compose
from playground.config.overrides import ABSENT, lookup
from playground.config.schema import as_plain_dict
from playground.diagnose import catalogue, injected
from playground.diagnose.engine import diagnose
from playground.diagnose.report import format_diagnosis, format_markdown
from tests.diagnose.test_engine import FLAT, run

NOISY = run(**FLAT, **{"critic/rewards/std": 20.0})  # reward_variance_too_large, the score flat


def _config(task: str, *overrides: str) -> dict:
    return as_plain_dict(compose([f"task={task}", *overrides]), resolve=False)


def _finding(report, fid):
    return next(f for f in report.findings if f.id == fid)


def test_a_token_runs_noise_is_named_apart_from_the_lever_that_cures_it():
    config = _config("reverse", "scenario=reward_variance_too_large", "reward.noise_std=3.0")
    found = _finding(diagnose(NOISY, family="token", config=config), "reward_variance_too_large")
    assert found.fix == "reward.clip=1.0"  # the guide's "clip the rewards", not the noise switched off
    (cause,) = found.injected
    assert (cause["key"], cause["value"], cause["remedy"]) == ("reward.noise_std", 3.0, {})  # a lever cures it
    assert cause["verl"]["en"].startswith("a reward function whose output varies")
    assert [lever["key"] for lever in found.levers] == ["reward.clip"]
    text = format_diagnosis("run", diagnose(NOISY, family="token", config=config)).splitlines()
    broke = text.index("    what broke this run: reward.noise_std=3.0 (in a verl run: a reward function whose output "
                       "varies far more than the quality it scores (a noisy reward model, a heavy-tailed score))")
    assert text[broke + 1] == "    fix: reward.clip=1.0"  # the cause first, then the fix, then the fix in verl
    assert text[broke + 2].startswith("    in verl: reward.clip: clip the score in your reward function")
    zh = format_diagnosis("run", diagnose(NOISY, family="token", config=config), lang="zh")
    assert "本次运行的故障来源: reward.noise_std=3.0 (在 verl 运行中: 输出的波动远大于" in zh
    assert "在 verl 中: reward.clip: 在奖励函数里裁剪分数" in zh
    markdown = format_markdown("run", diagnose(NOISY, family="token", config=config))
    assert "- what broke this run: `reward.noise_std=3.0` (in a verl run: a reward function" in markdown


def test_a_broken_reward_functions_fix_says_what_to_change_in_the_users_code():
    """cartpole's noise, a hundred times the signal: no lever cures it, so the fix removes it and says how."""
    config = _config("cartpole", "scenario=reward_variance_too_large", "reward.noise_std=100.0")
    found = _finding(diagnose(NOISY, family="gym", config=config), "reward_variance_too_large")
    assert found.fix == "reward.noise_std=0.0"
    assert found.injected[0]["remedy"]["en"].startswith("the reward itself has to change")
    text = format_diagnosis("run", diagnose(NOISY, family="gym", config=config))
    assert "    in your code: the reward itself has to change" in text


def test_no_config_or_a_knob_at_its_healthy_value_names_no_cause():
    assert _finding(diagnose(NOISY, family="token"), "reward_variance_too_large").injected == []  # a verl log
    healthy = _config("reverse")
    assert injected.causes("reward_variance_too_large", healthy, "reward.clip=1.0") == []
    assert injected.causes("lr_too_high", _config("reverse", "reward.noise_std=3.0")) == []  # not its id's cause
    # pendulum's own reward.scale (0.1) is the task's, not a cause; 1e-4 is
    assert injected.causes("vanishing_gradient", _config("pendulum")) == []
    (scale,) = injected.causes("vanishing_gradient", _config("pendulum", "reward.scale=1e-4"))
    assert injected.knob(scale) == "reward.scale=0.0001"
    (clip,) = injected.causes("gradient_explosion", _config("pendulum", "actor_rollout_ref.actor.grad_clip=null"))
    assert injected.knob(clip) == "actor_rollout_ref.actor.grad_clip=null"


@pytest.mark.parametrize("value, broken, expected", [
    (0.0, {"gt": 0}, False), (3.0, {"gt": 0}, True), (1e-4, {"outside": [0.01, 10.0]}, True),
    (0.1, {"outside": [0.01, 10.0]}, False), (None, {"eq": None}, True), (False, {"eq": None}, False),
    ("full", {"ne": "full"}, False), ("none", {"ne": "full"}, True), (False, {"eq": False}, True),
    (0, {"eq": False}, False), (True, {"gt": 0}, False),  # a bool is no number
])
def test_is_broken(value, broken, expected):
    assert injected.is_broken(value, broken) is expected


def test_every_cause_and_lever_names_a_key_the_config_has():
    configs = [_config(task) for task in ("cartpole", "reverse")]
    for key in [c["key"] for c in injected.document()["causes"]] + list(injected.document()["levers"]):
        assert any(lookup(config, key) is not ABSENT for config in configs), key


def _fix_specs():
    """Every fix the gym and token families are offered: the catalogue's, each rule's own, the alternatives."""
    document = catalogue.document()
    for fid, entry in document["catalogue"].items():
        yield fid, entry.get("fix")
        for alt in entry.get("alternatives", []):
            yield fid, {"*": alt["fix"]}
    for rule in document["rules"]:
        if rule.get("fix"):
            yield rule["id"], rule["fix"]


def test_no_offered_fix_only_undoes_a_reward_or_env_knob_without_saying_what_to_change_in_the_users_code():
    """A fix that sets an injected reward.* or env.* knob back removes the cause: only a broken component (a reward
    function) may be fixed that way, and its cause then says what to change in the user's code. Every playground key
    a fix sets says what it is in verl."""
    causes = {c["key"]: c for c in injected.document()["causes"]}
    for fid, spec in _fix_specs():
        for family in ("gym", "token"):
            for step in catalogue.fix_steps(spec, family):
                key = step["key"]
                if key in causes and key.split(".")[0] in ("reward", "env"):
                    assert causes[key]["remedy"], (fid, family, key)
                if key.split(".")[0] in ("reward", "env") or key in PLAYGROUND_KEYS:
                    assert key in injected.document()["levers"], (fid, family, key)


def test_a_bad_document_is_an_error(monkeypatch, tmp_path):
    bad = tmp_path / "injected.yaml"
    bad.write_text("causes:\n  - {key: reward.scale, ids: [no_such_id], broken: {gt: 0}, verl: {en: a, zh: b}}\n")
    monkeypatch.setattr(injected, "PATH", bad)
    injected.document.cache_clear()
    try:
        with pytest.raises(injected.InjectedError, match="unknown: \\['no_such_id'\\]"):
            injected.document()
        bad.write_text("causes:\n  - {key: reward.scale, ids: [vanishing_gradient], broken: {near: 0}, "
                       "verl: {en: a, zh: b}}\n")
        injected.document.cache_clear()
        with pytest.raises(injected.InjectedError, match="broken is one of"):
            injected.document()
    finally:
        monkeypatch.undo()
        injected.document.cache_clear()
