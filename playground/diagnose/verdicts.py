"""The verdicts on a run as a whole (`rules.yaml`'s `verdicts`), given once every rule has run: `healthy` where the
run shows no problem and its score rose, `inconclusive` where it is too short for the rules to judge it.

A verdict needs its evidence. A run of fewer training steps than the rules' windows (the guide's §11.4 example 1 is
one step) is not called healthy: it is `inconclusive`, and each metric outside the guide's range is listed with the
guide's own reading of that range (a fresh critic's high loss and gradient are "normal only at the start"). Its fix
trains longer than the run has or will have; a run still training (run.json "running") is instead "too early to say
(step k of N)", with no fix: it is getting its steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from playground import failures
from playground.diagnose import catalogue
from playground.diagnose.calibration import family_band, has_band
from playground.diagnose.conditions import compile_condition
from playground.diagnose.finding import Finding
from playground.diagnose.log import SHORTCUT_KEYS, Log, on_policy_shortcut
from playground.diagnose.series import compile_series
from playground.metric_names import ACTOR_GROUP, CRITIC_GROUP
from playground.teach.i18n import LANGS, UI_STRINGS_PATH, text_in

# A record with one of these is a training step; a validation-only record (verl's step 0 with val_before_train) is not.
TRAINING_PREFIXES = (f"{ACTOR_GROUP}/", f"{CRITIC_GROUP}/")
INCONCLUSIVE = "inconclusive"


def training_steps(log: Log) -> int:
    """How many training steps the log covers: from its first training record's step to its last (a log that prints
    every 10th step, as the guide's §1.3 examples do, covers the steps between)."""
    columns = [col for key, col in log.cols.items() if key.startswith(TRAINING_PREFIXES)]
    steps = [log.steps[i] for i in range(log.n) if any(col[i] is not None for col in columns)]
    return steps[-1] - steps[0] + 1 if steps else 0


def out_of_range(log: Log, family: str) -> list[dict]:
    """Evidence rows for each metric outside its ok range (the family's bands, else the guide's), at the first step
    it was: its band's status and, as its range, the guide's reading of that band. A zero clipfrac and ppo_kl of the
    on-policy shortcut are not measured values, so they are not listed."""
    rows = []
    shortcut = [on_policy_shortcut({k: log.get(k, i) for k in SHORTCUT_KEYS}) for i in range(log.n)]
    for key in log.cols:
        if not has_band(key, family):
            continue
        for i in range(log.n):
            value = None if shortcut[i] and key in SHORTCUT_KEYS else log.get(key, i)
            band = None if value is None else family_band(key, value, family)
            if band is not None and band["status"] != "ok":
                # a family's calibrated bands (rules.yaml) carry no reading of their own, the guide's do
                reading = band.get("label", {}).get("en") or f"outside the {family} family's calibrated range"
                rows.append({"metric": key, "step": log.steps[i], "value": value, "range": reading,
                             "status": band["status"]})
                break
    return rows


def _inconclusive(log: Log, steps: int, needed: int, config: Mapping[str, Any] | None) -> Finding:
    rows = out_of_range(log, log.facts["family"]) if log.n else []
    first, last = (log.steps[0], log.steps[-1]) if log.n else (0, 0)
    if log.facts.get("status") == "running":  # it is getting its steps: no fix, no "log more steps"
        total = log.facts.get("total_steps")
        key = "verdict_too_early" if total else "verdict_too_early_no_total"
        explanation = {lang: text_in(UI_STRINGS_PATH, key, lang, step=last, total=total, needed=needed)
                       for lang in LANGS}
        return Finding(id=INCONCLUSIVE, severity=failures.severity(INCONCLUSIVE), first_step=first, last_step=last,
                       evidence=rows, explanation=explanation, rule=INCONCLUSIVE, fix="")
    counted = f"{steps} training step{'s' * (steps != 1)}, the rules' windows need {needed}"
    explanation = {lang: text.format(counted=counted) for lang, text in catalogue.explanation(INCONCLUSIVE).items()}
    return Finding(id=INCONCLUSIVE, severity=failures.severity(INCONCLUSIVE), first_step=first,
                   last_step=last, evidence=rows, explanation=explanation, rule=INCONCLUSIVE,
                   fix=catalogue.render_fix(INCONCLUSIVE, log.facts["family"], _with_steps(config, log)))


def _with_steps(config: Mapping[str, Any] | None, log: Log) -> dict[str, Any]:
    """The run's config with `trainer.total_training_steps` (what the fix raises) at the most steps the run has or
    was to have (its config's, run.json's `total_steps`, its log's last step): the fix starts from there, never below
    it (a log read without its config was told 10 steps after 60)."""
    trainer = dict((config or {}).get("trainer") or {})
    known = [trainer.get("total_training_steps"), log.facts.get("total_steps"), log.steps[-1] if log.n else None]
    numbers = [int(n) for n in known if isinstance(n, (int, float)) and not isinstance(n, bool)]
    if numbers:
        trainer["total_training_steps"] = max(numbers)
    return {**(config or {}), "trainer": trainer}


def verdicts(log: Log, findings: list[Finding], family: str, notes: list[str],
             config: Mapping[str, Any] | None = None) -> list[Finding]:
    """The findings the verdicts give on the run as a whole, judged on the steps with a score; `notes` gains what
    could not be judged. `config`, the run's, sizes the fix (train longer) of an inconclusive run."""
    score = compile_series("score", {})
    known = [i for i in range(log.n) if score.value(log, i) is not None]
    out = []
    for spec in catalogue.document().get("verdicts", []):
        if log.n == 0 and log.facts.get("status") == "running":  # before its first step: too early, not silence
            out.append(_inconclusive(log, 0, spec["min_steps"], config))
            continue
        if log.n == 0 or any(f.severity in spec["unless"] for f in findings):
            continue
        if log.facts.get("status") in spec.get("unless_status", ()):
            notes.append(f"the run ended {log.facts['status']}: not called {spec['name']}")
            continue
        steps = training_steps(log)
        if steps < spec["min_steps"] and not log.shape_only:
            out.append(_inconclusive(log, steps, spec["min_steps"], config))
            continue
        if len(known) < spec["short_run"]:
            notes.append(f"{spec['name']}: too little data to tell whether the score rose ({len(known)} score value"
                         f"{'s' * (len(known) != 1)}, needs {spec['short_run']})")
        elif compile_condition(spec["when"], {}, {}).over(log, known) is not True:
            notes.append(spec["otherwise"])
            continue
        ends = dict.fromkeys(known[:1] + known[-1:])  # the first and the last score
        evidence = [{"metric": score.metric_name(log), "step": log.steps[i], "value": score.value(log, i),
                     "range": "rises towards score_target", "status": "ok"} for i in ends]
        out.append(Finding(id=spec["id"], severity=failures.severity(spec["id"]), first_step=log.steps[0],
                           last_step=log.steps[-1], evidence=evidence, explanation=catalogue.explanation(spec["id"]),
                           fix="", rule=spec["name"]))
    return out
