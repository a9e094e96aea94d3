"""`python -m playground.diagnose --catalogue`: the rules of `rules.yaml` as one Markdown table an instructor can read.

One row per rule, then one per verdict on the whole run (healthy), then one per artifact (a note, never a finding):
the catalogue id it reports, what it looks for in words, its thresholds as the guide gives them and as each task family
uses them (a family's own values in bold), the playground knobs that cause it here (what each is in a verl run), its fix
as Hydra overrides (a playground key with the lever a verl user pulls), and the guide's section (an artifact: its verl
reference). docs/catalogue.md is this table, kept up to date by tests/diagnose/test_catalogue.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from playground.diagnose import catalogue, injected
from playground.diagnose.calibration import FAMILIES, calibrated
from playground.metrics import fmt

HEADERS = {
    "en": ("id", "rule", "signature", "guide", *FAMILIES, "cause injected here (in a verl run)",
           "fix (Hydra overrides)", "guide §"),
    "zh": ("id", "规则", "特征", "指南", *FAMILIES, "此处注入的原因（在 verl 运行中）", "修复（Hydra 覆盖）",
           "指南章节"),
}
IN_VERL = {"en": "in verl: ", "zh": "在 verl 中："}
IN_CODE = {"en": "in your code: ", "zh": "在你的代码中："}
NOT_APPLIED = {"en": "n/a", "zh": "不适用"}
AS_GUIDE = {"en": "= guide", "zh": "同指南"}
NONE = "—"
NOTE = {"en": "(note)", "zh": "（说明）"}  # an artifact's row: a note with its verl reference, never a finding


def _cell(text: str) -> str:
    """Text a table cell can hold: a `|` would end the cell."""
    return " ".join(text.split()).replace("|", "\\|")


def _thresholds(rule: Mapping[str, Any], family: str | None, lang: str) -> str:
    """`name value, ...` as the guide gives them (family None) or as the family uses them: its own values in bold,
    "= guide" where it has none."""
    thresholds = rule.get("thresholds") or {}
    if not thresholds:
        return NONE
    own = {name: entry for name in thresholds if family and (entry := calibrated(family, rule["name"], name))}
    if family and not own:
        return AS_GUIDE[lang]
    return ", ".join(f"**{name} {fmt(own[name].value)}**" if name in own else f"{name} {fmt(float(guide))}"
                     for name, guide in thresholds.items())


def _fixes(rule: Mapping[str, Any]) -> dict[str, str]:
    """The rule's fix per family it applies to, rendered without a run's config."""
    return {f: catalogue.render_fix(rule["id"], f, None, rule.get("fix")) for f in rule.get("families", FAMILIES)}


def _with_levers(fix: str, lang: str) -> str:
    """`fix` as overrides, then what its playground keys are in verl (the lever a verl user pulls)."""
    levers = "; ".join(f"`{lever['key']}`: {lever['verl'][lang]}" for lever in injected.levers(fix))
    return f"`{fix}`" + (f" ({IN_VERL[lang]}{levers})" if levers else "")


def _fix(rule: Mapping[str, Any], lang: str) -> str:
    """The rule's fix as the families it applies to get it: one set of overrides, or one per family, each with its
    playground keys as a verl user pulls them."""
    fixes = _fixes(rule)
    if len(set(fixes.values())) == 1:
        (only,) = set(fixes.values())
        return _with_levers(only, lang) if only else NONE
    return "; ".join(f"{f}: {_with_levers(fix, lang)}" if fix else f"{f}: {NONE}" for f, fix in fixes.items())


def _cause(rule: Mapping[str, Any], lang: str) -> str:
    """The playground knobs that cause the rule's id (injected.yaml), what each is in a verl run, and what to change
    in the user's code where the rule's fix only removes it."""
    keys = {key for fix in _fixes(rule).values() for key in injected.fix_keys(fix)}
    cells = []
    for cause in injected.document()["causes"]:
        if rule["id"] in cause["ids"]:
            remedy = f"; {IN_CODE[lang]}{cause['remedy'][lang]}" if cause["remedy"] and cause["key"] in keys else ""
            cells.append(f"`{cause['key']}` ({cause['verl'][lang]}{remedy})")
    return "; ".join(cells) or NONE


def markdown(lang: str = "en") -> str:
    """The catalogue table, one row per rule in `rules.yaml`'s order, then one per verdict."""
    headers = HEADERS[lang]
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for rule in catalogue.document()["rules"]:
        families = rule.get("families", FAMILIES)
        cells = [f"`{rule['id']}`", f"`{rule['name']}`", rule["signature"][lang], _thresholds(rule, None, lang),
                 *(_thresholds(rule, f, lang) if f in families else NOT_APPLIED[lang] for f in FAMILIES),
                 _cause(rule, lang), _fix(rule, lang), rule["section"]]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    for verdict in catalogue.document().get("verdicts", []):  # judged on the whole run once the rules have run
        thresholds, fix = [NONE] * (1 + len(FAMILIES)), NONE  # the guide's and each family's: none
        cells = [f"`{verdict['id']}`", f"`{verdict['name']}`", verdict["signature"][lang], *thresholds, NONE, fix,
                 verdict["section"]]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    for artifact in catalogue.document().get("artifacts", []):  # notes, not findings: no id, no fix
        families = artifact.get("families", FAMILIES)
        cells = [NOTE[lang], f"`{artifact['name']}`", artifact["signature"][lang], _thresholds(artifact, None, lang),
                 *(AS_GUIDE[lang] if f in families else NOT_APPLIED[lang] for f in FAMILIES), NONE, NONE,
                 artifact["reference"]]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"
