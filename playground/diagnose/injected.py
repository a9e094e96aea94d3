"""What broke a playground run, said apart from its fix: the injected causes and the verl levers (`injected.yaml`).

A scenario breaks a run with a knob no verl run has (`reward.noise_std`, `reward.nan_rate`, a rollout whose weights
never arrive). A finding whose id such a knob causes names it, with its value and what it stands for in a verl run
(`causes`), so that the offered fix reads as the lever a verl user has (`levers`: what a fix's playground keys are in
verl) and not as "undo what the scenario did". Where the only cure is to remove the cause (a broken reward function),
the cause carries its `remedy`: what to change in the user's own code.
"""

from __future__ import annotations

import functools
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from playground.config.overrides import ABSENT, OverrideError, key_values, lookup

PATH = Path(__file__).with_name("injected.yaml")
TESTS = ("gt", "ge", "lt", "eq", "ne", "outside")
LANGS = ("en", "zh")


class InjectedError(ValueError):
    """injected.yaml does not have the shape this module reads."""


def _text(entry: Any, where: str) -> dict[str, str]:
    if not isinstance(entry, dict) or any(not isinstance(entry.get(lang), str) or not entry[lang] for lang in LANGS):
        raise InjectedError(f"{PATH.name}: {where} needs en and zh texts")
    return {lang: " ".join(entry[lang].split()) for lang in LANGS}


@functools.lru_cache(maxsize=1)
def document() -> dict[str, Any]:
    """`injected.yaml`, checked: `causes` (key, ids, broken, verl, remedy) and `levers` (key -> {en, zh})."""
    from playground.failures import FAILURE_IDS

    data = yaml.safe_load(PATH.read_text(encoding="utf-8"))
    causes = []
    for n, cause in enumerate(data.get("causes") or []):
        where = f"causes[{n}] ({cause.get('key')})"
        unknown = [i for i in cause.get("ids") or [] if i not in FAILURE_IDS]
        if not isinstance(cause.get("key"), str) or not cause.get("ids") or unknown:
            raise InjectedError(f"{PATH.name}: {where} needs a key and catalogue ids (unknown: {unknown})")
        broken = cause.get("broken")
        if not isinstance(broken, dict) or len(broken) != 1 or next(iter(broken)) not in TESTS:
            raise InjectedError(f"{PATH.name}: {where}: broken is one of {', '.join(TESTS)}")
        causes.append({"key": cause["key"], "ids": tuple(cause["ids"]), "broken": broken,
                       "verl": _text(cause.get("verl"), where + " verl"),
                       "remedy": _text(cause["remedy"], where + " remedy") if "remedy" in cause else {}})
    levers = {key: _text(text, f"levers.{key}") for key, text in (data.get("levers") or {}).items()}
    return {"causes": causes, "levers": levers}


def is_broken(value: Any, broken: Mapping[str, Any]) -> bool:
    """Whether a knob's value is a cause (`broken`: one test); a value of another type than the test's is not."""
    (test, bound), = broken.items()
    if test == "eq":
        return value is bound or (value == bound and type(value) is type(bound))
    if test == "ne":
        return not (value is bound or (value == bound and type(value) is type(bound)))
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    if test == "outside":
        lo, hi = bound
        return not lo <= value <= hi
    return {"gt": value > bound, "ge": value >= bound, "lt": value < bound}[test]


def fix_keys(fix: str) -> list[str]:
    """The keys a fix's Hydra overrides set, in order ("" and placeholders give none that parse)."""
    try:
        return list(key_values(tuple(shlex.split(fix or ""))))
    except (ValueError, OverrideError):
        return []


def causes(finding_id: str, config: Mapping[str, Any] | None, fix: str = "") -> list[dict[str, Any]]:
    """The injected knobs of the run's config that cause this id: `{key, value, verl, remedy}` each, `remedy` kept
    only where `fix` sets the knob (the cure is removing the cause; else `{}`). None without a config."""
    if not config:
        return []
    keys = set(fix_keys(fix))
    out = []
    for cause in document()["causes"]:
        value = lookup(config, cause["key"]) if finding_id in cause["ids"] else ABSENT
        if value is not ABSENT and is_broken(value, cause["broken"]):
            out.append({"key": cause["key"], "value": value, "verl": dict(cause["verl"]),
                        "remedy": remedy(cause["key"]) if cause["key"] in keys else {}})
    return out


def remedy(key: str) -> dict[str, str]:
    """What to change in the user's code for an injected knob, `{en, zh}` ({} where the knob has a lever instead)."""
    return next((dict(c["remedy"]) for c in document()["causes"] if c["key"] == key), {})


def levers(fix: str) -> list[dict[str, Any]]:
    """What the fix's playground keys are in a verl run: `{key, verl}` each, for the keys verl has no name for."""
    known = document()["levers"]
    return [{"key": key, "verl": dict(known[key])} for key in fix_keys(fix) if key in known]


def knob(cause: Mapping[str, Any]) -> str:
    """`key=value` as an override writes it (null, true, false)."""
    value = cause["value"]
    text = "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    return f"{cause['key']}={text}"
