"""The llm family's calibration, measured: the distribution of every judged quantity over the real, public healthy
verl logs (tests/diagnose/fixtures/real/logs.yaml), and what the engine reports on every real log.

`python -m benchmarks.llm_calibration` prints one JSON line per log (its roots and every warning), one per quantity
(p1, p10, p50, p90, p99, max over the healthy console logs' steps, and which log holds the extreme), and one per
calibrated threshold: the tightest value every healthy console log allows, measured with the rule's own window (a
wandb block's sparklines carry shapes, not sizes: they are judged, not measured). The thresholds in
`playground/diagnose/calibration.py` for family "llm" quote these lines.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import yaml

from playground.diagnose.readers import read_any
from playground.diagnose.robust import running_level
from playground.diagnose.series import ENTROPY_KEYS
from playground.diagnose.sources import diagnose_read

PANEL = Path(__file__).resolve().parents[1] / "tests" / "diagnose" / "fixtures" / "real"
GRAD_CLIP = 1.0  # every panel log runs verl's default (SOURCES.md)


NEW_TAG = "new-51"  # logs collected for issue 51: judged on the panel, kept out of the calibration until scored


def panel() -> list[dict]:
    with open(PANEL / "logs.yaml", encoding="utf-8") as f:
        return yaml.safe_load(f)


def calibration_logs() -> list[dict]:
    """The healthy logs the llm thresholds are measured on: every healthy panel log but those tagged `new-51`, which
    came after the thresholds were set and stay out of them until the integrator has scored them (logs.yaml)."""
    return [e for e in panel() if e["verdict"] == "healthy" and NEW_TAG not in e.get("tags", [])]


def _windows(values: list[float], size: int) -> list[list[float]]:
    """Every run of `size` consecutive values (the whole list when it is shorter), as the engine's windows."""
    if len(values) <= size:
        return [values] if values else []
    return [values[i:i + size] for i in range(len(values) - size + 1)]


def _swing(part: list[float]) -> float:
    return sum(abs(b - a) for a, b in zip(part[:-1], part[1:])) / max(1, len(part) - 1)


def _col(records: list[dict], key: str) -> list[float]:
    return [r[key] for r in records if key in r and math.isfinite(r[key])]


def _entropy(records: list[dict]) -> list[float]:
    """The entropy the rules read (`series.ENTROPY_KEYS`): verl >= 0.4's pre-update `actor/entropy` where the log has
    it, else `actor/entropy_loss`."""
    key = next((k for k in ENTROPY_KEYS if any(k in r for r in records)), ENTROPY_KEYS[-1])
    return _col(records, key)


def rule_statistics(records: list[dict]) -> dict[str, float]:
    """Per calibrated threshold, the tightest value this healthy log allows: the rule, with that threshold, would
    just not fire on any of its windows (the windows and fractions are the rules' own, in rules.yaml)."""
    out = {}
    # a logged 0 is verl's on-policy shortcut or a value rounded away in print: the rule skips it (not measured)
    moving = [abs(r["actor/ppo_kl"]) for r in records if r.get("actor/ppo_kl", 0) != 0]
    kl_windows = _windows(moving, 10)
    if kl_windows:  # lr_too_low: 80% of a 10-step window below kl_low fires; so kl_low must stay under each 20% point
        out["lr_too_low.kl_low (max allowed)"] = min(float(np.percentile(w, 20)) for w in kl_windows)
    ratios = _windows([v / GRAD_CLIP for v in _col(records, "actor/grad_norm")], 10)
    if ratios:  # grad_clip_saturation: 80% of a 10-step window clipped
        out["grad_clip_saturation.clipped (min allowed)"] = max(float(np.percentile(w, 20)) for w in ratios)
    swings = [w for w in _windows(_col(records, "actor/pg_loss"), 10) if len(w) >= 3]
    if swings:
        out["unstable_policy_loss.swing (min allowed)"] = max(_swing(w) for w in swings)
    for key, name in (("actor/kl_loss", "kl_drift_loss"), ("actor/reward_kl_penalty", "kl_drift_reward")):
        if _col(records, key):
            out[f"{name}.kl_ref_high (min allowed)"] = max(_col(records, key))
    entropy = _windows(_entropy(records), 10)
    if entropy:  # overly_deterministic: 80% of a window below rel_low (nats: max_entropy unknown in a verl log)
        out["overly_deterministic.rel_low (max allowed)"] = min(float(np.percentile(w, 20)) for w in entropy)
        out["entropy_collapse.fall (min allowed)"] = max(
            1 - np.mean(w[-max(1, len(w) // 5):]) / np.mean(w[:max(1, len(w) // 5)]) for w in entropy)
    spreads = _windows([r["critic/advantages/max"] - r["critic/advantages/min"] for r in records
                        if "critic/advantages/max" in r and "critic/advantages/min" in r], 5)
    if spreads:  # advantage_not_normalized: 60% of a 5-step window past spread_high (with an extreme past 10)
        out["advantage_not_normalized.spread_high (min allowed)"] = max(float(np.percentile(w, 40)) for w in spreads)
    return out


def shape_statistics(records: list[dict]) -> dict[str, float]:
    """The new llm rules' quantities on one healthy log (issue 38): what each threshold must stay beyond. A rule fires
    past its threshold; the tightest healthy value is the one the panel shows it does not reach."""
    out = {}
    grad = _col(records, "actor/grad_norm")
    ratios = sorted((g / level for k, g in enumerate(grad) if (level := running_level(grad, k))), reverse=True)
    if len(ratios) >= 3:  # gradient_spikes needs three: the third-largest spike of a healthy log must stay under it
        out["gradient_spikes.spike, 3rd largest (min allowed)"] = ratios[2]
    held = _col(records, "val/score")  # carried between evaluations in a log read by the diagnosis; here as logged
    evaluations = [v for k, v in enumerate(held) if k == 0 or v != held[k - 1]]
    if len(evaluations) >= 3:  # reward_hacking_heldout: the last two evaluations' fall from the peak, of the peak
        top = max(evaluations)
        out["reward_hacking_heldout.fall (min allowed)"] = (top - max(evaluations[-2:])) / max(abs(top), 0.05)
    if entropy := _entropy(records):
        out["entropy_collapse_floor.floor (max allowed)"] = float(np.percentile(entropy, 20))
    return out


def quantities(records: list[dict]) -> dict[str, list[float]]:
    """Per quantity a rule judges, its values over one log's steps."""
    adv = [(r["critic/advantages/max"] - r["critic/advantages/min"], abs(r.get("critic/advantages/mean", 0.0)))
           for r in records if "critic/advantages/max" in r and "critic/advantages/min" in r]
    return {
        "actor/pg_clipfrac": _col(records, "actor/pg_clipfrac"),
        "|actor/ppo_kl|": [abs(v) for v in _col(records, "actor/ppo_kl")],
        "grad_norm / grad_clip": [v / GRAD_CLIP for v in _col(records, "actor/grad_norm")],
        "entropy (nats)": _entropy(records),
        "actor/kl_loss": _col(records, "actor/kl_loss"),
        "actor/reward_kl_penalty": _col(records, "actor/reward_kl_penalty"),
        "advantages max - min": [a for a, _ in adv],
        "|advantages mean|": [m for _, m in adv],
        "response_length/clip_ratio": _col(records, "response_length/clip_ratio"),
        "critic/vf_explained_var": _col(records, "critic/vf_explained_var"),
    }


def main() -> None:
    logs = panel()
    calibrating = {e["file"] for e in calibration_logs()}
    pooled: dict[str, list[tuple[float, str]]] = {}
    tightest: dict[str, list[tuple[float, str]]] = {}
    for entry in logs:
        read = read_any(PANEL / entry["file"])
        report = diagnose_read(read)
        warnings = sorted({f.id for f in report.findings if f.severity != "info"})
        print(json.dumps({"log": entry["file"], "verdict": entry["verdict"], "steps": len(read.records),
                          "roots": report.roots(), "warnings": warnings}), flush=True)
        # a wandb block's history is a sparkline: its shape is the run's, its sizes are not (readers_wandb)
        if entry["file"] in calibrating and read.kind == "verl_console":
            for name, values in quantities(read.records).items():
                pooled.setdefault(name, []).extend((v, entry["file"]) for v in values)
            for name, value in {**rule_statistics(read.records), **shape_statistics(read.records)}.items():
                tightest.setdefault(name, []).append((value, entry["file"]))
    for name, pairs in pooled.items():
        if not pairs:
            continue
        values = np.array([v for v, _ in pairs])
        hi, lo = max(pairs), min(pairs)
        print(json.dumps({"quantity": name, "n": len(values), "logs": len({f for _, f in pairs}),
                          **{f"p{q}": float(np.percentile(values, q)) for q in (1, 10, 50, 90, 99)},
                          "min": lo[0], "min_in": lo[1], "max": hi[0], "max_in": hi[1]}), flush=True)


    for name, pairs in tightest.items():  # over all healthy logs: the most demanding one decides
        value, log = (min if "max allowed" in name else max)(pairs)
        print(json.dumps({"threshold": name, "value": value, "set_by": log, "logs": len(pairs)}), flush=True)


if __name__ == "__main__":
    main()
