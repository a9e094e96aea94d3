"""The Step inspector's data, without Streamlit: a step's token records (`tokens.jsonl`, `playground.rundir.runs`) as
per-token values, the responses in the order a finding asks for, and each response as coloured HTML.

The quantities (`QUANTITIES`), per token: its advantage; the ratio π_θ/π_old at the last update that held it; where
the clip bound (`clipped`: upper when the advantage is positive and the ratio rose past 1 + ε, lower when it is
negative and the ratio fell past 1 − ε, dual where the dual clip capped a negative advantage's loss); its entropy;
the KL term log π_old − log π_ref (k1, the reference's log-prob under the KL loss or the KL in the reward); and the
rollout's probability minus the trainer's (where the rollout reported its own log-probs).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from playground.metrics import fmt
from playground.rundir.runs import TOKEN_QUANTITIES

QUANTITIES = TOKEN_QUANTITIES
# What a finding's tokens are: the quantity the inspector colours by and the responses it shows first.
FINDING_FOCUS = {"lr_too_high": "clipped", "grad_clip_saturation": "clipped", "unstable_policy_loss": "ratio",
                 "off_policy_staleness": "ratio", "entropy_explosion": "entropy", "entropy_collapse": "entropy",
                 "overly_deterministic": "entropy", "rollout_mismatch": "mismatch", "kl_drift": "kl",
                 "no_learning_signal": "zero_adv", "advantage_not_normalized": "advantage"}
CLIP_SIDES = ("", "upper", "lower", "dual")


def _last_update(record: dict[str, Any]) -> dict[str, Any]:
    updates = record.get("updates") or []
    return updates[-1] if updates else {}


def clip_side(advantage: float, clipped: int, dual: int) -> str:
    """Which side of the band a clipped token left: the advantage's sign says which bound the clipped term took."""
    if dual:
        return "dual"
    if clipped:
        return "upper" if advantage > 0 else "lower"
    return ""


def token_values(record: dict[str, Any]) -> pd.DataFrame:
    """One response's tokens: position, token, mask, each quantity (None where the step has no such value) and the
    critic's value; `clipped` as a side (`CLIP_SIDES`) from any update that held the token."""
    n = len(record["tokens"])
    last = _last_update(record)
    updates = record.get("updates") or []
    ratio = [math.exp(v) if v is not None else None for v in last.get("log_ratio", [None] * n)]
    clipped = [max((u.get("clipped") or [0] * n)[t] for u in updates) if updates else 0 for t in range(n)]
    dual = [max((u.get("clipped_lower") or [0] * n)[t] for u in updates) if updates else 0 for t in range(n)]
    adv = record["advantages"]
    old, ref, rollout = record["old_log_prob"], record.get("ref_log_prob"), record.get("rollout_log_prob")
    return pd.DataFrame({
        "position": range(n), "token": record["tokens"], "mask": record["mask"], "advantage": adv, "ratio": ratio,
        "clipped": [clip_side(adv[t], clipped[t], dual[t]) for t in range(n)],
        "entropy": record.get("entropy") or [None] * n,
        "kl": [o - r for o, r in zip(old, ref)] if ref is not None else [None] * n,
        "mismatch": [math.exp(r) - math.exp(o) for o, r in zip(old, rollout)] if rollout is not None else [None] * n,
        "value": record.get("values") or [None] * n})  # the critic's V(s_t), shown on hover


@dataclass(frozen=True, eq=False)
class Response:
    """A recorded response and its tokens' values (`token_values`), computed once for everything the page draws."""

    record: dict[str, Any]
    values: pd.DataFrame


def responses(records: Sequence[dict[str, Any]]) -> list[Response]:
    return [Response(r, token_values(r)) for r in records]


def step_tokens(shown: Sequence[Response]) -> pd.DataFrame:
    """Every trained token (mask 1) of a step's responses, with its response's row: the step's distributions."""
    frames = [r.values.assign(row=r.record["row"]) for r in shown]
    if not frames:
        return pd.DataFrame(columns=["row", "position", "token", "mask", *QUANTITIES])
    every = pd.concat(frames, ignore_index=True)
    return every[every["mask"] == 1]


def group_alike(record: dict[str, Any]) -> bool:
    """Whether every response of the record's group got the same reward (GRPO: every advantage 0)."""
    rewards = record["group"]["rewards"]
    return len(rewards) > 1 and len(set(rewards)) == 1


def ordered(shown: Sequence[Response], focus: str) -> list[Response]:
    """The step's responses, those a focus is about first: the most clipped, the highest entropy, the largest
    rollout − trainer gap, the largest KL, the zero-advantage groups, or the largest |advantage|."""
    def score(response: Response) -> float:
        trained = response.values[response.values["mask"] == 1]
        if focus == "clipped":
            return float((trained["clipped"] != "").sum())
        if focus == "zero_adv":
            return float(group_alike(response.record))
        column = {"ratio": "ratio", "entropy": "entropy", "kl": "kl", "mismatch": "mismatch"}.get(focus, "advantage")
        numbers = pd.to_numeric(trained[column], errors="coerce").dropna()
        if column == "ratio":
            numbers = (numbers - 1).abs()
        elif column in ("kl", "mismatch", "advantage"):
            numbers = numbers.abs()
        return float(numbers.max()) if not numbers.empty else -math.inf
    return sorted(shown, key=lambda r: (-score(r), r.record["row"]))


def group_summary(record: dict[str, Any]) -> dict[str, float]:
    """The record's group as GRPO reads it: the rewards' mean and (unbiased) std, and this response's normalised
    reward (r − mean) / (std + 1e-6), its advantage under GRPO with `norm_adv_by_std_in_grpo`."""
    rewards = record["group"]["rewards"]
    mean = sum(rewards) / len(rewards)
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (len(rewards) - 1)) if len(rewards) > 1 else 0.0
    return {"mean": mean, "std": std, "normalised": (record["reward"] - mean) / (std + 1e-6)}


def colour(value: Any, quantity: str, scale: float) -> str:
    """A token's background: blue for positive, red for negative (diverging quantities, `scale` the step's largest
    magnitude); orange for entropy; red, blue or purple for a clip on the upper, lower or dual side."""
    if quantity == "clipped":
        return {"upper": "rgba(214,39,40,0.55)", "lower": "rgba(31,119,180,0.55)",
                "dual": "rgba(148,103,189,0.65)"}.get(value, "transparent")
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "transparent"
    x = float(value) - (1.0 if quantity == "ratio" else 0.0)
    strength = min(abs(x) / scale, 1.0) if scale > 0 else 0.0
    if quantity == "entropy":
        return f"rgba(245,133,24,{0.08 + 0.72 * strength:.3f})"
    rgb = "31,119,180" if x > 0 else "214,39,40"
    return f"rgba({rgb},{0.08 + 0.72 * strength:.3f})"


def scale_of(tokens: pd.DataFrame, quantity: str) -> float:
    """The colour scale's full strength: the step's largest magnitude of the quantity (ratio: of ratio − 1)."""
    if quantity == "clipped" or quantity not in tokens:
        return 1.0
    numbers = pd.to_numeric(tokens[quantity], errors="coerce").dropna()
    if quantity == "ratio":
        numbers = numbers - 1
    return float(numbers.abs().max()) if not numbers.empty else 1.0


def response_html(response: Response, quantity: str, scale: float) -> str:
    """A response's tokens as HTML spans, coloured by `quantity`; each token's values on hover; an environment's
    reply (mask 0: read, never trained on) greyed and dotted."""
    spans = []
    for row in response.values.to_dict("records"):
        text = html.escape(row["token"]).replace(" ", "&nbsp;") or "&nbsp;"
        tip = " · ".join(f"{q} {fmt(row[q])}" for q in (*QUANTITIES, "value") if row[q] not in (None, ""))
        if not row["mask"]:
            style = "color:#888;border-bottom:1px dotted #888"
            tip = f"environment · {tip}"
        else:
            style = f"background:{colour(row[quantity], quantity, scale)}"
        spans.append(f'<span title="{html.escape(tip)}" style="{style};padding:1px 2px;margin:0 1px;'
                     f'border-radius:3px;font-family:monospace">{text}</span>')
    return '<div style="line-height:2.0">' + "".join(spans) + "</div>"
