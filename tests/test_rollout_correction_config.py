"""`algorithm.rollout_correction`'s keys, verl's presets (`+rollout_correction=<name>`), their one-line errors, and the
run-level wiring: a correction needs the rollout's own log-probs (`actor_rollout_ref.rollout.calculate_log_probs`).

The run-level test is written for both sides of issue 23: while the rollout cannot report its log-probs (no
`calculate_log_probs` key), a correction is refused before any compute; once it can, the same test trains a short
reverse run with token TIS and reads the `rollout_corr/*` metrics back.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from playground.config import CONF_DIR, ConfigError, compose, known_options, validate
from playground.config.overrides import ABSENT
from playground.rundir.runs import read_metrics_jsonl

PRESETS = known_options("rollout_correction")
CALCULATE_LOG_PROBS = "actor_rollout_ref.rollout.calculate_log_probs"
RC = "algorithm.rollout_correction"


@pytest.fixture(scope="module")
def reverse():
    """The composed reverse config, once (Hydra composes in ~1 s); each test merges its keys into a copy."""
    return compose(["task=reverse"])


def _with(base, preset: str | None = None, **keys):
    """`base` with a preset file merged as Hydra merges a `# @package _global_` group file, then `keys` set."""
    cfg = copy.deepcopy(base)
    if preset is not None:
        cfg = OmegaConf.merge(cfg, OmegaConf.load(Path(CONF_DIR) / "rollout_correction" / f"{preset}.yaml"))
    for key, value in keys.items():
        OmegaConf.update(cfg, key.replace("__", "."), value, force_add=True)
    return cfg


def _rollout_reports_log_probs(cfg) -> bool:
    """Whether this tree's rollout can report its own log-probs (issue 23's rollout side)."""
    return OmegaConf.select(cfg, CALCULATE_LOG_PROBS, default=ABSENT) is not ABSENT


def test_verl_presets_are_all_here_the_default_is_off_and_hydra_composes_a_preset(reverse):
    assert {"decoupled_token_is", "decoupled_seq_is", "decoupled_token_icepop", "decoupled_seq_is_rs",
            "decoupled_geo_rs", "bypass_ppo_clip", "bypass_pg_is", "decoupled_k3_rs", "disabled"} <= set(PRESETS)
    validate(reverse)
    assert OmegaConf.to_container(reverse.algorithm.rollout_correction) == {
        "rollout_is": None, "rollout_is_threshold": 2.0, "rollout_is_batch_normalize": False, "rollout_rs": None,
        "rollout_rs_threshold": None, "bypass_mode": False, "loss_type": "ppo_clip"}  # verl's defaults
    composed = compose(["task=reverse", "+rollout_correction=decoupled_token_icepop"])
    assert composed == _with(reverse, "decoupled_token_icepop")


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_validates_once_the_rollout_reports_its_log_probs(reverse, preset):
    cfg = _with(reverse, preset)
    assert preset.startswith("bypass") == cfg.algorithm.rollout_correction.bypass_mode
    if preset == "disabled":
        validate(cfg)
    elif not _rollout_reports_log_probs(cfg):
        with pytest.raises(ConfigError, match="needs the rollout's own log-probs"):
            validate(cfg)
    else:
        with pytest.raises(ConfigError, match=f"{CALCULATE_LOG_PROBS}=False is out of range"):
            validate(_with(reverse, preset, **{CALCULATE_LOG_PROBS: False}))
        validate(_with(reverse, preset, **{CALCULATE_LOG_PROBS: True}))


def test_preset_values_are_verls(reverse):
    def corr(preset):
        c = _with(reverse, preset).algorithm.rollout_correction
        return c.rollout_is, c.rollout_is_threshold, c.rollout_rs, c.rollout_rs_threshold, c.bypass_mode, c.loss_type

    assert corr("decoupled_token_is") == ("token", 2.0, None, None, False, "ppo_clip")
    assert corr("decoupled_token_icepop") == ("token", "0.5_5.0", None, None, False, "ppo_clip")
    assert corr("decoupled_seq_is_rs") == ("sequence", 2.0, "seq_sum_k1", "0.5_2.0", False, "ppo_clip")
    assert corr("decoupled_geo_rs") == (None, 2.0, "seq_mean_k1", "0.999_1.001", False, "ppo_clip")
    assert corr("bypass_ppo_clip") == (None, 2.0, None, None, True, "ppo_clip")
    assert corr("bypass_pg_is") == ("sequence", 2.0, None, None, True, "reinforce")


@pytest.mark.parametrize("key, value, message", [
    ("rollout_is", "tokens", "rollout_is='tokens' is out of range: allowed null or one of ['token', 'sequence']"),
    ("rollout_is_threshold", -1, "rollout_is_threshold=-1 is out of range"),
    ("rollout_is_threshold", "5.0_0.5", "rollout_is_threshold='5.0_0.5' is out of range"),
    ("rollout_is_threshold", "abc", "rollout_is_threshold='abc' is out of range"),
    ("rollout_is_batch_normalize", "yes", "rollout_is_batch_normalize='yes' is out of range"),
    ("rollout_rs", "seq_sum_k9", "rollout_rs='seq_sum_k9' is out of range"),
    ("rollout_rs", "token_k1", "rollout_rs_threshold=None is out of range"),
    ("rollout_rs_threshold", 2.0, "null unless rollout_rs is set"),
    ("loss_type", "reinforce", "'ppo_clip' unless bypass_mode=true"),
    ("loss_type", "pg", "loss_type='pg' is out of range"),
])
def test_bad_values_are_one_line_errors_naming_the_key(reverse, key, value, message):
    with pytest.raises(ConfigError, match="^" + RC.replace(".", r"\.") + r"\.") as error:
        validate(_with(reverse, **{f"{RC}.{key}": value}))
    assert message in str(error.value) and "\n" not in str(error.value)


def test_an_icepop_band_that_hydra_would_read_as_a_number_is_refused():
    with pytest.raises(ConfigError, match=r"rollout_is_threshold=0\.5_5 reads as the number 0\.55 .*quote"):
        compose(["task=reverse", f"{RC}.rollout_is_threshold=0.5_5"])
    with pytest.raises(ConfigError, match="rollout_rs_threshold=1_2 reads as the number 12"):
        compose(["task=reverse", f"{RC}.rollout_rs_threshold=1_2"])
    assert compose(["task=reverse", f"{RC}.rollout_is_threshold='0.5_5'"]).algorithm.rollout_correction[
        "rollout_is_threshold"] == "0.5_5"


def test_a_correction_is_refused_on_gym_tasks_and_bypass_keeps_the_vanilla_loss(reverse):
    with pytest.raises(ConfigError, match="out of range for gym tasks"):
        validate(_with(compose(["task=cartpole"]), **{f"{RC}.rollout_is": "token"}))
    with pytest.raises(ConfigError, match="loss_mode='gspo' is out of range with .*bypass_mode=true"):
        validate(_with(reverse, "bypass_ppo_clip", **{"actor_rollout_ref.actor.policy_loss.loss_mode": "gspo"}))


def test_a_reverse_run_with_token_tis(train_run):
    """Run level. Without the rollout's log-probs (issue 23's rollout side not here yet): refused before any compute.
    With them: two steps of token TIS log verl's rollout_corr/* family."""
    overrides = ["task=reverse", "+debug=tiny", "trainer.total_training_steps=2",
                 "+rollout_correction=decoupled_token_is"]
    if not _rollout_reports_log_probs(compose(["task=reverse"])):
        with pytest.raises(ConfigError, match="needs the rollout's own log-probs"):
            train_run(overrides)
        return
    _, run_dir = train_run([*overrides, f"{CALCULATE_LOG_PROBS}=true"])
    records = [r for r in read_metrics_jsonl(run_dir / "metrics.jsonl").records if "actor/pg_loss" in r]
    assert len(records) == 2
    for key in ("kl", "k3_kl", "chi2_token", "chi2_seq", "rollout_is_mean", "rollout_is_eff_sample_size",
                "training_ppl", "rollout_ppl"):
        assert all(math.isfinite(r[f"rollout_corr/{key}"]) for r in records), key
    assert all(0 < r["rollout_corr/rollout_is_eff_sample_size"] <= 1 + 1e-6 for r in records)
