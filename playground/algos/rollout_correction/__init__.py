"""verl's rollout correction (`verl/trainer/ppo/rollout_corr_helper.py`, `core_algos`' bypass losses), pure functions:
the rollout engine sampled the tokens with one policy, the trainer trains on them with another.

- `spec`: `algorithm.rollout_correction` resolved into `RolloutCorrectionSpec` (its checks, and `enabled`: whether a
  correction acts at all), torch-free so `playground.config` checks it before anything is built;
- `importance`: the IS weights π_old/π_rollout and the off-policy diagnostics `rollout_corr/*`;
- `rejection`: rejection sampling (`rollout_rs`), tokens or sequences zeroed in the response mask;
- `bypass`: bypass mode's losses (two policies: the rollout's log-probs are the old ones).

The step applies them through one owner, `playground.step.rollout_correction.RolloutCorrection`.
"""
