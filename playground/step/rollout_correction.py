"""`algorithm.rollout_correction` in the step, as verl's `RayPPOTrainer.fit` applies it (`rollout_corr_helper`).

The rollout reports the log-probs it sampled with (`batch["rollout_log_probs"]`, written by the rollout worker when
`actor_rollout_ref.rollout.calculate_log_probs` is on). Two modes, verl's:

- decoupled (`bypass_mode=false`, three policies: rollout, old = the actor's recompute, current): in the `adv` phase,
  before the advantage, the IS weights π_old/π_rollout go into the batch as `rollout_is_weights` (each policy loss
  multiplies its per-token loss by them) and rejection sampling zeroes the rejected tokens of `response_mask` (the
  advantage, the critic and the loss skip them). `rollout_corr/*` are logged. With every correction off, the
  diagnostics alone are logged whenever the rollout reports its log-probs (verl's metrics-only mode).
- bypass (`bypass_mode=true`, two policies): the rollout's log-probs are the old ones, the `old_log_prob` recompute is
  skipped, and the update's loss (`algos.rollout_correction.bypass`) corrects and masks per micro-batch against the
  current policy.
"""

from __future__ import annotations

from typing import Final

from torch import Tensor

from playground.algos.rollout_correction.importance import compute_rollout_correction_and_rejection_mask
from playground.algos.rollout_correction.spec import RolloutCorrectionSpec
from playground.tasks.base import Batch

ROLLOUT_LOG_PROBS: Final = "rollout_log_probs"  # Final: the checker reads it as the literal key of `Batch`


class RolloutCorrection:
    """The config's rollout correction, applied to a step's batch: the one place the step reads
    `algorithm.rollout_correction` (the rollout worker asks `spec.enabled` whether to hand on its log-probs, the actor
    gets `spec` for bypass mode's loss).
    """

    def __init__(self, spec: RolloutCorrectionSpec):
        self.spec = spec

    @property
    def bypass_mode(self) -> bool:
        return self.spec.bypass_mode

    def _rollout_log_probs(self, batch: Batch) -> Tensor:
        if ROLLOUT_LOG_PROBS not in batch:
            raise ValueError("algorithm.rollout_correction needs the rollout's log-probs (batch['rollout_log_probs']): "
                             "set actor_rollout_ref.rollout.calculate_log_probs=true")
        return batch[ROLLOUT_LOG_PROBS]

    def apply_bypass_mode(self, batch: Batch) -> None:
        """verl's `apply_bypass_mode`: the rollout's log-probs are the old ones (no `old_log_prob` recompute)."""
        batch["old_log_probs"] = self._rollout_log_probs(batch)

    def apply(self, batch: Batch) -> dict[str, list[Tensor]]:
        """Decoupled mode (verl's `compute_rollout_correction_and_add_to_batch`): put `rollout_is_weights` into the
        batch and the rejection into `response_mask`; returns `rollout_corr/*` as the step's metrics. Nothing in bypass
        mode (the loss does it, `algos.rollout_correction.bypass`), nor when the correction is off and the rollout
        reported no log-probs."""
        if self.spec.bypass_mode or (not self.spec.enabled and ROLLOUT_LOG_PROBS not in batch):
            return {}
        weights, mask, metrics = compute_rollout_correction_and_rejection_mask(
            batch["old_log_probs"], self._rollout_log_probs(batch), batch["response_mask"],
            **self.spec.correction_kwargs())
        batch["response_mask"] = mask
        if weights is not None:
            batch["rollout_is_weights"] = weights
        return {key: [value] for key, value in metrics.items()}
