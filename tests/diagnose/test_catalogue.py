"""Tests for the rule catalogue as data: every family's thresholds as they were before they moved into `rules.yaml`
(a snapshot), the schema's errors, and `python -m playground.diagnose --catalogue`."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from playground.diagnose import catalogue, schema
from playground.diagnose.calibration import FAMILIES, resolved_thresholds
from playground.diagnose.conditions import compile_condition

SNAPSHOT = Path(__file__).parent / "fixtures" / "resolved_thresholds.json"


def test_every_family_resolves_the_thresholds_of_the_snapshot():
    """The snapshot was written from the Python overrides (calibration.py) before the per-family values moved into
    rules.yaml: each rule's (value, evidence text) per family must not change."""
    resolved = {family: {spec["name"]: {k: list(v) for k, v in resolved_thresholds(spec, family).items()}
                         for spec in catalogue.document()["rules"] if family in spec.get("families", FAMILIES)}
                for family in FAMILIES}
    assert resolved == json.loads(SNAPSHOT.read_text(encoding="utf-8"))


# ---- the schema --------------------------------------------------------------------------------------------
def _with_rule(name: str, **changes) -> dict:
    """rules.yaml with one rule changed (None deletes a key)."""
    document = copy.deepcopy(catalogue.document())
    (rule,) = [r for r in document["rules"] if r["name"] == name]
    for key, value in changes.items():
        if value is None:
            del rule[key]
        else:
            rule[key] = value
    return document


def test_rules_yaml_has_the_schema():
    schema.check(catalogue.document())


def test_a_misspelt_key_names_the_rule_and_the_key():
    document = _with_rule("lr_too_high", windw=5)
    with pytest.raises(ValueError, match=r"rules.yaml: rule 'lr_too_high': windw: unknown key"):
        schema.check(document)


@pytest.mark.parametrize(("changes", "message"), [
    ({"id": "lr_too_hihg"}, r"rule 'lr_too_high': id: unknown catalogue id 'lr_too_hihg'"),
    ({"kind": "windowed"}, r"rule 'lr_too_high': kind: Input should be 'point', 'window', 'trend' or 'run'"),
    ({"section": None}, r"rule 'lr_too_high': section: Field required"),
    ({"families": ["gym", "tokens"]}, r"rule 'lr_too_high': families.1: Input should be 'gym', 'token' or 'llm'"),
    ({"calibrated": {"clipfrac_hihg": {"gym": {"value": 0.2, "seeds": 8, "measured": "x"}}}},
     r"rule 'lr_too_high': calibrated names thresholds the rule does not have: \['clipfrac_hihg'\]"),
    ({"calibrated": {"clipfrac_high": {"gym": {"value": 0.2, "seeds": 8}}}},
     r"rule 'lr_too_high': calibrated.clipfrac_high.gym.measured: Field required"),
])
def test_a_wrong_rule_is_an_error_naming_it(changes, message):
    with pytest.raises(ValueError, match=message):
        schema.check(_with_rule("lr_too_high", **changes))


def test_a_wrong_section_or_catalogue_entry_is_an_error():
    document = copy.deepcopy(catalogue.document())
    document["catalogue"]["lr_too_high"]["fxi"] = []
    with pytest.raises(ValueError, match=r"rules.yaml: catalogue.lr_too_high.fxi: unknown key"):
        schema.check(document)
    document = copy.deepcopy(catalogue.document())
    document["rules"].append(copy.deepcopy(document["rules"][0]))
    with pytest.raises(ValueError, match=r"rule 'training_crash_reward': a second rule of that name"):
        schema.check(document)


def test_an_unknown_guard_is_an_error():
    with pytest.raises(ValueError, match=r"unknown guard 'below_targte'"):
        compile_condition({"guard": "below_targte"}, {}, {}, catalogue.document()["guards"])


def test_the_guard_is_named_once_and_used_by_the_rules_that_ask_for_a_stall():
    users = [r["name"] for r in catalogue.document()["rules"] if "'guard': 'below_target'" in str(r["when"])]
    assert users == ["lr_too_high", "entropy_collapse", "overly_deterministic", "vanishing_gradient"]
