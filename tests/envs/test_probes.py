"""Andy Jones' probe environments are learned to ARENA's tolerances (values 5e-4, probabilities 1e-3)."""

import pytest
import torch

from playground.envs.probes import PROBE_EXPECTED_PROBS, PROBE_EXPECTED_VALUES

VALUE_TOL, PROB_TOL, BUDGET = 5e-4, 1e-3, 30_000


@pytest.mark.parametrize("probe", [1, 2, 3, 4, 5])
def test_probe_is_learned(probe, train_run):
    trainer = train_run([f"task=probe{probe}"])[0].trainer
    assert trainer.task.env_steps <= BUDGET
    observations, values = PROBE_EXPECTED_VALUES[probe]
    obs = torch.tensor(observations).unsqueeze(0)  # (K=1, B, 1)
    predicted = trainer.task.critic.values({"obs": obs}).reshape(-1)
    expected = torch.tensor(values(float(trainer.hp.gamma.flatten()[0])))
    assert (predicted - expected).abs().max().item() < VALUE_TOL, (predicted.tolist(), expected.tolist())
    if probe in PROBE_EXPECTED_PROBS:
        observations, probs = PROBE_EXPECTED_PROBS[probe]
        logits, _ = trainer.task.actor.distribution_params(torch.tensor(observations).unsqueeze(0))
        predicted = torch.softmax(logits, -1).reshape(len(observations), -1)
        assert (predicted - torch.tensor(probs)).abs().max().item() < PROB_TOL, predicted.tolist()
