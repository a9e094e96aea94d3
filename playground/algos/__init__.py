"""verl's core algorithms as pure functions behind small registries (advantages, policy losses, KL)."""

from playground.algos.advantages import ADV_ESTIMATORS, get_adv_estimator_fn, register_adv_est
from playground.algos.kl import AdaptiveKLController, FixedKLController, get_kl_controller, kl_penalty
from playground.algos.losses import (
    LOSS_AGG_MODES,
    POLICY_LOSSES,
    agg_loss,
    compute_value_loss,
    explained_variance,
    get_policy_loss_fn,
    register_policy_loss,
)
from playground.algos.masked import entropy_from_logits, masked_mean, masked_var, masked_whiten

__all__ = [
    "ADV_ESTIMATORS", "LOSS_AGG_MODES", "POLICY_LOSSES", "AdaptiveKLController", "FixedKLController",
    "agg_loss", "compute_value_loss", "entropy_from_logits", "explained_variance", "get_adv_estimator_fn",
    "get_kl_controller", "get_policy_loss_fn", "kl_penalty", "masked_mean", "masked_var", "masked_whiten",
    "register_adv_est", "register_policy_loss",
]
