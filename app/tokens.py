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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
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
    """The record's group's rewards as the page describes them: their mean and (unbiased) std (0 for one response).
    The estimator's own statistics are `advantage_note`'s."""
    rewards = record["group"]["rewards"]
    mean = sum(rewards) / len(rewards)
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (len(rewards) - 1)) if len(rewards) > 1 else 0.0
    return {"mean": mean, "std": std}


# ---- how a response's advantage came: the run's estimator (`algorithm.*`), recomputed from the records ----

# The ε GRPO and GRPO pass@k divide by, σ + ε: their default in `playground.algos.advantages`, which the trainer never
# overrides (no config key sets it; tests/app/test_advantage_notes.py checks both). The app may not import torch.
GRPO_EPSILON = 1e-6


@dataclass(frozen=True)
class AdvantageSettings:
    """A run's advantage estimator and what it reads, from the run's config (`.hydra/config.yaml`)."""

    estimator: str  # algorithm.adv_estimator
    norm_by_std: bool  # algorithm.norm_adv_by_std_in_grpo (GRPO, GRPO pass@k; false: Dr. GRPO)
    norm_adv: bool  # algorithm.norm_adv: GAE whitens over the batch
    gamma: float  # algorithm.gamma (GAE, REINFORCE++)
    lam: float  # algorithm.lam (GAE)
    kl_in_reward: bool  # algorithm.use_kl_in_reward: the reward trained on is the score less β·KL
    multi_turn: bool  # actor_rollout_ref.rollout.multi_turn.enable: turn rewards inside a response


ALGORITHM_KEYS = ("adv_estimator", "norm_adv_by_std_in_grpo", "norm_adv", "gamma", "lam", "use_kl_in_reward")


def advantage_settings(config: dict[str, Any]) -> AdvantageSettings | None:
    """The run's estimator settings; None where its config lacks one of them (no `.hydra/config.yaml`): the page
    then cannot say which formula ran. A run from before multi-turn episodes existed was single-turn."""
    algorithm = config.get("algorithm") or {}
    if any(algorithm.get(key) is None for key in ALGORITHM_KEYS):
        return None
    rollout = (config.get("actor_rollout_ref") or {}).get("rollout") or {}
    return AdvantageSettings(
        estimator=str(algorithm["adv_estimator"]), norm_by_std=bool(algorithm["norm_adv_by_std_in_grpo"]),
        norm_adv=bool(algorithm["norm_adv"]), gamma=float(algorithm["gamma"]), lam=float(algorithm["lam"]),
        kl_in_reward=bool(algorithm["use_kl_in_reward"]),
        multi_turn=bool((rollout.get("multi_turn") or {}).get("enable", False)))


@dataclass(frozen=True)
class AdvantageNote:
    """How one response's advantage came, as its run computed it.

    `about` names the estimator as the run set it (the UI string `inspector_adv_<about>`, its numbers
    `about_fields`).
    Where the records hold what the estimator read, `computed` (`inspector_adv_value_<computed>`, its numbers
    `fields`) is this response's value by that formula: `value` for an estimator that gives every token of a
    response one advantage, `per_token` for GAE. Where they do not, `why` (`inspector_why_<why>`) says what is
    missing and the page shows the recorded advantages, `recorded`: their least and greatest over the trained
    tokens (None: no trained token)."""

    about: str
    about_fields: dict[str, Any] = field(default_factory=dict)
    computed: str = ""
    fields: dict[str, Any] = field(default_factory=dict)
    value: float | None = None
    per_token: tuple[float, ...] | None = None
    why: str = ""
    recorded: tuple[float, float] | None = None


def _estimator_stats(rewards: Sequence[float]) -> tuple[float, float]:
    """A group's mean and unbiased std as the estimators take them (`algos.advantages.group_row_stats`): a group of
    one gets mean 0 and std 1."""
    n = len(rewards)
    if n == 1:
        return 0.0, 1.0
    mean = sum(rewards) / n
    return mean, math.sqrt(sum((r - mean) ** 2 for r in rewards) / (n - 1))


def _grpo(record: dict[str, Any], norm_by_std: bool) -> tuple[str, dict[str, float], float]:
    r = float(record["reward"])
    mean, std = _estimator_stats(record["group"]["rewards"])
    if norm_by_std:
        return "grpo_std", {"r": r, "mean": mean, "std": std, "eps": GRPO_EPSILON}, (r - mean) / (std + GRPO_EPSILON)
    return "grpo_no_std", {"r": r, "mean": mean}, r - mean


def _grpo_passk(record: dict[str, Any], norm_by_std: bool) -> tuple[str, dict[str, float], float]:
    """Only the group's best response (the first of equals, by row) is credited: its margin over the runner-up."""
    rows, rewards = record["group"]["rows"], record["group"]["rewards"]
    best = max(rewards)
    first = rewards.index(best)
    if rows[first] != record["row"]:
        return "passk_other", {"best_row": rows[first]}, 0.0
    runner_up = max((x for i, x in enumerate(rewards) if i != first), default=-math.inf)
    _, std = _estimator_stats(rewards)
    margin = best - runner_up
    if norm_by_std:
        return "passk_best_std", {"r": best, "runner_up": runner_up, "std": std, "eps": GRPO_EPSILON}, \
            margin / (std + GRPO_EPSILON)
    return "passk_best_no_std", {"r": best, "runner_up": runner_up}, margin


def _rloo(record: dict[str, Any]) -> tuple[str, dict[str, float], float]:
    r, rewards = float(record["reward"]), record["group"]["rewards"]
    n = len(rewards)
    if n == 1:
        return "rloo_alone", {"r": r}, r
    mean = sum(rewards) / n
    return "rloo", {"r": r, "mean": mean, "n": n, "others": n - 1}, n / (n - 1) * (r - mean)


def _opo(record: dict[str, Any], lengths: dict[int, int]) -> tuple[str, dict[str, float], float] | None:
    """The group's length-weighted mean score as the baseline; None where a group member's length is not recorded."""
    rows, rewards = record["group"]["rows"], record["group"]["rewards"]
    if any(row not in lengths for row in rows):
        return None
    r = float(record["reward"])
    weight = sum(lengths[row] for row in rows)
    baseline = sum(lengths[row] * x for row, x in zip(rows, rewards)) / weight if len(rows) > 1 else 0.0
    return "opo", {"r": r, "baseline": baseline}, r - baseline


def gae_values(record: dict[str, Any], gamma: float, lam: float) -> list[float]:
    """GAE over the response's tokens in verl's masked form (`algos.advantages.compute_gae_advantage_return`, not
    whitened): the reward on the last trained token, the critic's values, nothing bootstrapped past the end."""
    mask, values = record["mask"], record["values"]
    trained = [t for t, m in enumerate(mask) if m]
    last_trained = trained[-1] if trained else -1
    out = [0.0] * len(mask)
    next_value = last_gae = 0.0
    for t in reversed(range(len(mask))):
        reward = float(record["reward"]) if t == last_trained else 0.0
        gae = reward + gamma * next_value - values[t] + gamma * lam * last_gae
        if mask[t]:
            next_value, last_gae = values[t], gae
        out[t] = last_gae
    return out


# What the estimators read that the records do not hold (whitening's batch statistics, GPG's α over the batch,
# ReMax's greedy reward): their advantages are shown as recorded.
UNRECOMPUTABLE = {"reinforce_plus_plus": "batch", "reinforce_plus_plus_baseline": "batch", "gpg": "alpha",
                  "remax": "greedy"}


def advantage_note(record: dict[str, Any], settings: AdvantageSettings | None,
                   step_records: Sequence[dict[str, Any]] = ()) -> AdvantageNote:
    """How the record's advantage came under the run's `settings` (None: its config is not there), recomputed from
    the records where they hold what the estimator read; `step_records` (the record's step's) give OPO the lengths
    of the group's other responses."""
    trained = [a for a, m in zip(record["advantages"], record["mask"]) if m]
    recorded = (min(trained), max(trained)) if trained else None
    if settings is None:
        return AdvantageNote("unknown", why="config", recorded=recorded)
    name = settings.estimator
    about, numbers = name, {}
    if name in ("grpo", "grpo_passk"):
        about = f"{name}_{'std' if settings.norm_by_std else 'no_std'}"
        numbers = {"eps": GRPO_EPSILON} if settings.norm_by_std else {}
    elif name == "reinforce_plus_plus":
        numbers = {"gamma": settings.gamma}
    elif name == "gae":
        about = "gae_whitened" if settings.norm_adv else "gae"
        numbers = {"gamma": settings.gamma, "lam": settings.lam}

    def shown(why: str) -> AdvantageNote:
        return AdvantageNote(about, numbers, why=why, recorded=recorded)

    if settings.kl_in_reward:  # the group's rewards recorded are the scores, before the penalty the estimator read
        return shown("kl_in_reward")
    if name in UNRECOMPUTABLE:
        return shown(UNRECOMPUTABLE[name])
    if name == "gae":
        if settings.norm_adv:
            return shown("batch")
        if settings.multi_turn:
            return shown("turns")
        if record.get("values") is None:
            return shown("values")
        if recorded is None:
            return shown("empty")
        per_token = gae_values(record, settings.gamma, settings.lam)
        on_trained = [a for a, m in zip(per_token, record["mask"]) if m]
        return AdvantageNote(about, numbers, "gae", {"r": float(record["reward"]), "first": on_trained[0],
                                                      "last": on_trained[-1]}, per_token=tuple(per_token),
                             recorded=recorded)
    if name == "grpo":
        computed, fields, value = _grpo(record, settings.norm_by_std)
    elif name == "grpo_passk":
        computed, fields, value = _grpo_passk(record, settings.norm_by_std)
    elif name == "rloo":
        computed, fields, value = _rloo(record)
    elif name == "opo":
        same_step = [r for r in step_records if r["step"] == record["step"]] or [record]
        opo = _opo(record, {r["row"]: sum(r["mask"]) for r in same_step})
        if opo is None:
            return shown("lengths")
        computed, fields, value = opo
    else:
        return AdvantageNote("other", {"name": name}, why="estimator", recorded=recorded)
    return AdvantageNote(about, numbers, computed, {**fields, "value": value}, value=value, recorded=recorded)


def advantage_caption(note: AdvantageNote, text: Callable[..., str]) -> str:
    """The note in words: `text(key, **fields)` a UI string (`widgets.t`, or `i18n.text` with a language bound);
    numbers as `metrics.fmt` prints them."""
    def formatted(numbers: dict[str, Any]) -> dict[str, str]:
        return {key: fmt(float(v)) if isinstance(v, float) else str(v) for key, v in numbers.items()}

    words = text(f"inspector_adv_{note.about}", **formatted(note.about_fields))
    if note.computed:
        return words + " " + text(f"inspector_adv_value_{note.computed}", **formatted(note.fields))
    if note.recorded is None:
        recorded = "—"
    else:
        low, high = note.recorded
        recorded = fmt(float(low)) if low == high else f"{fmt(float(low))} … {fmt(float(high))}"
    return words + " " + text("inspector_adv_recorded", why=text(f"inspector_why_{note.why}"), recorded=recorded)


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
