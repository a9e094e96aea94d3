"""`algorithm.rollout_correction`'s choices and threshold specs, as verl's `RolloutCorrectionConfig` and
`rollout_corr_helper` read them; torch-free, so `playground.config` checks them before anything is built.

verl's keys (`verl/trainer/config/algorithm/rollout_correction.yaml`), default off:
- `rollout_is`: null | token | sequence — the importance weights π_old/π_rollout, per token or per sequence.
- `rollout_is_threshold`: a float (TIS: weights clamped to it) or a `"lower_upper"` string (IcePop: weights outside
  [lower, upper] zeroed).
- `rollout_is_batch_normalize`: divide the weights by their batch mean.
- `rollout_rs`: null or comma-separated rejection options (`RS_OPTIONS`); `rollout_rs_threshold`: one spec for all
  options or one per option (`*_k1`: `"lower_upper"` ratio bounds, a single float meaning 1/x_x; else an upper bound).
- `bypass_mode`: the rollout's log-probs are the old ones (no recompute); `loss_type`: ppo_clip | reinforce.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

IS_LEVELS = ("token", "sequence")
RS_OPTIONS = ("token_k1", "token_k2", "token_k3", "seq_sum_k1", "seq_sum_k2", "seq_sum_k3", "seq_mean_k1",
              "seq_mean_k2", "seq_mean_k3", "seq_max_k2", "seq_max_k3")
TOKEN_RS_OPTIONS = ("token_k1", "token_k2", "token_k3")
LOSS_TYPES = ("ppo_clip", "reinforce")
KEY = "algorithm.rollout_correction"


def parse_is_threshold(spec: Any) -> tuple[float, float | None]:
    """`(upper, lower)`: a float or float-like string is TIS's upper bound (lower None); `"lower_upper"` is IcePop's
    band. Raises ValueError (verl's checks: both positive, lower <= upper)."""
    if isinstance(spec, bool) or not isinstance(spec, (int, float, str)):
        raise ValueError("a positive number or a 'lower_upper' string")
    if isinstance(spec, str):
        lower_text, band, upper_text = spec.strip().partition("_")
        try:
            upper = float(upper_text if band else lower_text)
            lower = float(lower_text) if band else None
        except ValueError as exc:
            raise ValueError("a positive number or a 'lower_upper' string") from exc
    else:
        upper, lower = float(spec), None
    if not (math.isfinite(upper) and upper > 0):
        raise ValueError("an upper bound > 0")
    if lower is not None and not (math.isfinite(lower) and 0 < lower <= upper):
        raise ValueError("a lower bound in (0, upper]")
    return upper, lower


def parse_rs_options(spec: Any) -> list[str]:
    """The comma-separated options, duplicates dropped, in order; ValueError for an unknown or empty one."""
    if not isinstance(spec, str):
        raise ValueError(f"comma-separated options from {list(RS_OPTIONS)}")
    options: list[str] = []
    for option in (o.strip() for o in spec.split(",")):
        if option not in RS_OPTIONS:
            raise ValueError(f"comma-separated options from {list(RS_OPTIONS)}")
        if option not in options:
            options.append(option)
    return options


def parse_rs_thresholds(options: list[str], spec: Any) -> dict[str, tuple[float | None, float]]:
    """Per option `(lower, upper)`, as verl's `_parse_rollout_rs_thresholds`: one spec shared by every option or one
    per option; `*_k1` options take ratio bounds `"lower_upper"` (a single x means `1/x_x`), the others a single
    positive upper bound (lower None)."""
    if spec is None or isinstance(spec, bool):
        raise ValueError("a threshold per option (a number, or 'lower_upper' for *_k1)")
    raw = [str(spec)] if isinstance(spec, (int, float)) else [p.strip() for p in str(spec).split(",") if p.strip()]
    if len(raw) not in (1, len(options)):
        raise ValueError(f"one threshold shared by all options or exactly {len(options)}")
    raw = raw * len(options) if len(raw) == 1 else raw
    thresholds: dict[str, tuple[float | None, float]] = {}
    for option, text in zip(options, raw):
        if not option.endswith("k1") and "_" in text:
            raise ValueError(f"a single upper bound for {option} (no '_')")
        lower_text, ratio_band, upper_text = text.partition("_")
        try:
            upper = float(upper_text if ratio_band else text)
            lower = float(lower_text) if ratio_band else (1.0 / upper if option.endswith("k1") else None)
        except (ValueError, ZeroDivisionError) as exc:
            raise ValueError(f"a positive number for {option}") from exc
        if not (math.isfinite(upper) and upper > 0) or (lower is not None and not 0 < lower <= upper):
            raise ValueError(f"positive bounds with lower <= upper for {option}")
        thresholds[option] = (lower, upper)
    return thresholds


@dataclass(frozen=True)
class RolloutCorrectionSpec:
    """`algorithm.rollout_correction`, resolved once (verl's `RolloutCorrectionConfig`); checked by `config_error`."""

    rollout_is: str | None
    rollout_is_threshold: str | float | None
    rollout_is_batch_normalize: bool
    rollout_rs: str | None
    rollout_rs_threshold: str | float | None
    bypass_mode: bool
    loss_type: str

    @classmethod
    def from_config(cls, corr: Mapping[str, Any]) -> RolloutCorrectionSpec:
        """From the config's `algorithm.rollout_correction` section (every key present: the schema requires them)."""
        return cls(**{f.name: corr[f.name] for f in dataclasses.fields(cls)})

    @property
    def enabled(self) -> bool:
        """A correction acts on the loss (IS weights, rejection or bypass); else the config only logs
        `rollout_corr/*` when the rollout reports its log-probs (verl's metrics-only `disabled()`)."""
        return self.rollout_is is not None or self.rollout_rs is not None or self.bypass_mode

    def correction_kwargs(self) -> dict[str, Any]:
        """The keywords `importance.compute_rollout_correction_and_rejection_mask` takes (`bypass_mode` and
        `loss_type` pick the loss instead)."""
        return {"rollout_is": self.rollout_is, "rollout_is_threshold": self.rollout_is_threshold,
                "rollout_is_batch_normalize": self.rollout_is_batch_normalize, "rollout_rs": self.rollout_rs,
                "rollout_rs_threshold": self.rollout_rs_threshold}


def config_error(corr: Any) -> str | None:
    """The first bad `algorithm.rollout_correction.*` value as one line (key, value, what is allowed), else None."""
    def bad(key: str, allowed: str) -> str:
        return f"{KEY}.{key}={corr.get(key)!r} is out of range: allowed {allowed}"

    if corr.get("rollout_is") not in (None, *IS_LEVELS):
        return bad("rollout_is", f"null or one of {list(IS_LEVELS)}")
    try:
        parse_is_threshold(corr.get("rollout_is_threshold"))
    except ValueError as exc:
        return bad("rollout_is_threshold", f"a TIS cap > 0 or an IcePop band 'lower_upper' ({exc})")
    if not isinstance(corr.get("rollout_is_batch_normalize"), bool):
        return bad("rollout_is_batch_normalize", "true or false")
    if corr.get("rollout_rs") is not None:
        try:
            options = parse_rs_options(corr.get("rollout_rs"))
        except ValueError as exc:
            return bad("rollout_rs", f"null or {exc}")
        try:
            parse_rs_thresholds(options, corr.get("rollout_rs_threshold"))
        except ValueError as exc:
            return bad("rollout_rs_threshold", str(exc))
    elif corr.get("rollout_rs_threshold") is not None:
        return bad("rollout_rs_threshold", "null unless rollout_rs is set (it would be ignored)")
    if not isinstance(corr.get("bypass_mode"), bool):
        return bad("bypass_mode", "true or false")
    if corr.get("loss_type") not in LOSS_TYPES:
        return bad("loss_type", f"one of {list(LOSS_TYPES)}")
    if corr.get("loss_type") != "ppo_clip" and not corr.get("bypass_mode"):
        return bad("loss_type", "'ppo_clip' unless bypass_mode=true (decoupled mode keeps the actor's policy loss)")
    return None
