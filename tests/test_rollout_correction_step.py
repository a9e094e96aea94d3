"""Rollout correction in the real training step (`Trainer.train_step`) on the reverse task, with the rollout's
log-probs supplied here: the trainer's own log-probs minus a known shift, written into the batch by a wrapped
rollout, as the rollout worker writes them with `actor_rollout_ref.rollout.calculate_log_probs` (issue 23's other
part). The trainer is built directly: the config check would (rightly) refuse a correction whose rollout cannot
report its log-probs."""

from __future__ import annotations

import math

import pytest
import torch

from playground.config import compose
from playground.step.trainer import Trainer
from playground.train import build_trainer

SHIFT = 0.05  # log p_rollout = log p_trainer − SHIFT on every token: rollout_corr/kl = −SHIFT exactly


def _trainer(tmp_path, *overrides: str) -> Trainer:
    cfg = compose(["task=reverse", "+debug=tiny", "trainer.total_training_steps=2", "trainer.logger=[]",
                   "trainer.progress_bar=false", "trainer.test_freq=0", "trainer.val_before_train=false",
                   *overrides])
    trainer = build_trainer([cfg], [tmp_path], torch.device("cpu"))
    generate = trainer.rollout.generate

    def generate_with_log_probs(agents=None):
        batch = generate(agents)
        with torch.no_grad():
            batch["rollout_log_probs"] = trainer.task.log_prob_and_entropy(batch)[0] - SHIFT
        return batch

    trainer.rollout.generate = generate_with_log_probs
    return trainer


def test_decoupled_token_tis_logs_the_known_gap_and_weights_the_loss(tmp_path):
    trainer = _trainer(tmp_path, "+rollout_correction=decoupled_token_is")
    (record,) = trainer.train_step(1)
    assert record["rollout_corr/kl"] == pytest.approx(-SHIFT, abs=1e-5)
    assert record["rollout_corr/k3_kl"] == pytest.approx(math.exp(SHIFT) - SHIFT - 1, rel=1e-3)
    assert record["rollout_corr/rollout_is_mean"] == pytest.approx(math.exp(SHIFT), rel=1e-4)  # below the cap of 2
    assert record["rollout_corr/rollout_is_eff_sample_size"] == pytest.approx(1.0, abs=1e-5)  # uniform weights
    assert "timing_s/old_log_prob" in record and math.isfinite(record["actor/pg_loss"])


def test_bypass_skips_the_recompute_and_trains_against_the_rollout(tmp_path):
    trainer = _trainer(tmp_path, "+rollout_correction=bypass_ppo_clip")
    (record,) = trainer.train_step(1)
    assert "timing_s/old_log_prob" not in record  # the rollout's log-probs are the old ones
    assert record["rollout_corr/kl"] == pytest.approx(-SHIFT, abs=0.02)  # the current policy moves as it updates
    assert record["actor/ppo_kl"] != 0.0 and math.isfinite(record["actor/entropy"])


def test_metrics_only_when_the_correction_is_off_and_the_rollout_reports_its_log_probs(tmp_path):
    (record,) = _trainer(tmp_path, "actor_rollout_ref.rollout.calculate_log_probs=true").train_step(1)
    assert record["rollout_corr/kl"] == pytest.approx(-SHIFT, abs=1e-5)
    assert not any(key.startswith(("rollout_corr/rollout_is", "rollout_corr/rollout_rs")) for key in record)


def test_nothing_reads_the_rollouts_log_probs_when_neither_is_asked(tmp_path):
    """The default: no correction and no calculate_log_probs, so no RolloutCorrection is built and no rollout_corr/*."""
    trainer = _trainer(tmp_path)
    assert trainer.rollout_corr is None and trainer.rollout.weights is None  # the rollout shares the actor's model
    (record,) = trainer.train_step(1)
    assert not any(key.startswith("rollout_corr/") for key in record)
