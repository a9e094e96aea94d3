"""KL estimators and KL controllers, as verl's `core_algos.py` (v0.7): `kl_penalty`, Fixed/AdaptiveKLController.

Estimators follow J. Schulman, "Approximating KL divergence" (2020, joschu.net/blog/kl-approx.html).
Controllers hold their coefficient as a tensor, one entry per batched agent (a 0-d tensor for one).
"""

from __future__ import annotations

import torch
from torch import Tensor

from playground.algos.names import KL_ESTIMATORS


def kl_penalty_forward(logprob: Tensor, ref_logprob: Tensor, kl_penalty: str) -> Tensor:
    """Per-token KL estimate between the policy and the reference, d = logp − logp_ref.

    `kl`/`k1`: d. `abs`: |d|. `mse`/`k2`: ½d². `low_var_kl`/`k3`: with u = clamp(logp_ref − logp, ±20),
    `exp(u) − u − 1`, clamped to [−10, 10] (unbiased and always ≥ 0).
    """
    if kl_penalty in ("kl", "k1"):
        return logprob - ref_logprob
    if kl_penalty == "abs":
        return (logprob - ref_logprob).abs()
    if kl_penalty in ("mse", "k2"):
        return 0.5 * (logprob - ref_logprob).square()
    if kl_penalty in ("low_var_kl", "k3"):
        kl = torch.clamp(ref_logprob - logprob, min=-20, max=20)
        return torch.clamp(torch.exp(kl) - kl - 1, min=-10, max=10)
    if kl_penalty == "full":
        raise NotImplementedError("kl_penalty='full' needs the whole vocabulary's logits (verl does not implement it)")
    raise ValueError(f"kl penalty type {kl_penalty!r} is unknown; known: {list(KL_ESTIMATORS)} (optionally with '+')")


def kl_penalty(logprob: Tensor, ref_logprob: Tensor, kl_penalty: str) -> Tensor:
    """`kl_penalty_forward`, or with a `+` suffix (`k3+`): its forward value with k2's gradient.

    k1 and k3 have the right expected value but not the right expected gradient; k2 has the right
    gradient, so `k3+` is a straight-through estimator.
    """
    if not kl_penalty.endswith("+"):
        return kl_penalty_forward(logprob, ref_logprob, kl_penalty)
    forward_score = kl_penalty_forward(logprob, ref_logprob, kl_penalty[:-1])
    if kl_penalty in ("mse+", "k2+"):
        return forward_score
    backward_score = kl_penalty_forward(logprob, ref_logprob, "k2")
    return backward_score - backward_score.detach() + forward_score.detach()


class FixedKLController:
    """A constant KL coefficient β (`algorithm.kl_ctrl.type=fixed`)."""

    def __init__(self, kl_coef: float | Tensor):
        self.value = torch.as_tensor(kl_coef, dtype=torch.float32)

    def update(self, current_kl: Tensor, n_steps: int) -> None:
        """No-op."""


class AdaptiveKLController:
    """Ziegler et al. 2019 (arXiv 1909.08593): steer β so the measured KL tracks `target_kl`.

    `e = clip(KL / target − 1, −0.2, 0.2)`, `β ← β·(1 + e·n_steps / horizon)`.
    """

    def __init__(self, init_kl_coef: float | Tensor, target_kl: float | Tensor, horizon: float | Tensor):
        self.value = torch.as_tensor(init_kl_coef, dtype=torch.float32)
        self.target = torch.as_tensor(target_kl, dtype=torch.float32)
        self.horizon = torch.as_tensor(horizon, dtype=torch.float32)
        if bool((self.horizon <= 0).any()):
            raise ValueError(f"algorithm.kl_ctrl.horizon must be > 0, got {horizon}")

    def update(self, current_kl: Tensor, n_steps: int) -> None:
        proportional_error = torch.clamp(current_kl / self.target - 1, -0.2, 0.2)
        self.value = self.value * (1 + proportional_error * n_steps / self.horizon)


def get_kl_controller(
    type: str, kl_coef: float | Tensor, target_kl: float | Tensor = 0.1, horizon: float | Tensor = 10000
) -> FixedKLController | AdaptiveKLController:
    """The controller `algorithm.kl_ctrl.type` names."""
    if type == "fixed":
        return FixedKLController(kl_coef)
    if type == "adaptive":
        return AdaptiveKLController(kl_coef, target_kl, horizon)
    raise ValueError(f"algorithm.kl_ctrl.type={type!r} is unknown; known: ['fixed', 'adaptive']")
