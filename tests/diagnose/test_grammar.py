"""Tests for the rules' grammar: rules.yaml's header is the one the compiler's tables write and names every key, kind,
form and operator the compiler takes (and nothing else); a rule written in anything else fails to load, naming it;
the trend operators' registry; the shapes' tunables and their errors."""

from __future__ import annotations

import copy
import re

import pytest
import yaml

from playground.diagnose import catalogue, conditions, grammar, schema, series, trends, tunables
from playground.diagnose.log import Log


def _block() -> str:
    text = grammar.RULES_PATH.read_text(encoding="utf-8")
    return text[text.index(grammar.BEGIN):text.index(grammar.END)]


def test_rules_yaml_carries_todays_grammar():
    """Regenerate with `python -m playground.diagnose.grammar --write` after a change to a form, kind or key."""
    text = grammar.RULES_PATH.read_text(encoding="utf-8")
    assert grammar.replaced(text) == text
    assert grammar.main(["--check"]) == 0


def _documented(heading: str, block: str) -> set[str]:
    """The names listed under a heading of the grammar block (`#   name  text`, up to the next heading)."""
    after = block[block.index(heading) + len(heading):]
    part = re.split(r"^#(?: \S.*)?$", after, maxsplit=1, flags=re.M)[0]  # to the next heading or blank comment
    return set(re.findall(r"^#   (\w+) ", part, flags=re.M))


def test_the_header_names_every_key_kind_and_form_the_compiler_takes_and_no_other():
    block = _block()
    assert _documented("# A rule's keys:", block) == set(schema.RuleSpec.model_fields)
    assert _documented("# Its kind, how `when` is judged:", block) == set(schema.KINDS)
    assert _documented("# Sections:", block) == set(schema.Document.model_fields)
    assert _documented("# Built in", block) == set(series.BUILTIN) == set(series.BUILTIN_DOC)
    forms = set(re.findall(r"^#   \{(\w+):", block, flags=re.M))
    assert forms == set(conditions.FORMS) | set(series.FORMS)
    assert set(trends.TRENDS) <= forms


@pytest.mark.parametrize("form", [*conditions.FORMS.values(), *series.FORMS.values()], ids=lambda f: f.head)
def test_each_form_says_every_key_it_takes(form):
    written = {key for keys in re.findall(r"([\w|]+):", form.synopsis) for key in keys.split("|")}
    assert written == {form.head, *form.required, *form.optional, *form.one_of}
    assert form.doc.strip()


def _heads(spec, out: set[str]) -> set[str]:
    """Every condition form a condition uses, its parts' too."""
    (head,) = [k for k in spec if k in conditions.FORMS]
    out.add(head)
    if head in ("all", "any"):
        for part in spec[head]:
            _heads(part, out)
    elif head in ("not", "last", "frac"):
        _heads(spec[head], out)
    return out


def test_every_condition_of_rules_yaml_is_written_in_a_documented_form():
    document, documented = catalogue.document(), set(re.findall(r"^#   \{(\w+):", _block(), flags=re.M))
    used: set[str] = set()
    for spec in [*document["rules"], *document["artifacts"], *document["verdicts"]]:
        _heads(spec["when"], used)
    for spec in document["guards"].values():
        _heads(spec, used)
    assert used <= documented
    assert {"plateau", "spikes", "falls_from_peak", "logged", "trend_up", "trend_down", "finite"} <= used


def _with_when(when, **extra) -> dict:
    document = copy.deepcopy(catalogue.document())
    (rule,) = [r for r in document["rules"] if r["name"] == "plateau"]
    rule["when"] = when
    rule.update(extra)
    return document


@pytest.mark.parametrize(("when", "message"), [
    ({"rising_fast": "score"}, r"rule 'plateau': unknown condition \{'rising_fast': 'score'\}: names none of"),
    ({"drop": "score", "by": 0.1}, r"rule 'plateau': condition .*: unknown key by \(drop takes gt\)"),
    ({"all": [{"rising": "score"}, {"x": "score", "gt": 1, "lt": 2}]},
     r"rule 'plateau': condition .*: x takes exactly one of lt, le, gt, ge, eq"),
    ({"frac": {"x": "score", "gt": 0.5}}, r"rule 'plateau': condition .*: frac needs ge"),
    ({"drop": "score", "rising": "score"}, r"rule 'plateau': unknown condition .*: names 2 forms \(drop, rising\)"),
    ({"plateau": "score", "share": "$shrae"}, r"rule 'plateau': unknown threshold '\$shrae': one of \['share'\]"),
    ({"rising": {"log": "score"}}, r"rule 'plateau': unknown series \{'log': 'score'\}"),
    ({"rising": {"ratio": ["score", "entropy"], "flor": 1}}, r"rule 'plateau': series .*: unknown key flor"),
    ({"x": "score", "gt": "high"}, r"rule 'plateau': 'high' is no number, \$threshold or -\$threshold"),
    ({"guard": "below_targte"}, r"rule 'plateau': unknown guard 'below_targte'"),
    ({"all": 3}, r"rule 'plateau': all takes a list of conditions, not 3"),
])
def test_a_rule_written_in_an_undocumented_form_fails_to_load_naming_it(when, message):
    document = _with_when(when)
    schema.check(document)  # the shape is fine: the grammar is what fails
    with pytest.raises(ValueError, match=message):
        grammar.check(document)


def test_a_rule_needing_an_undocumented_series_fails_to_load():
    with pytest.raises(ValueError, match=r"rule 'plateau': unknown series \{'mean': 'score'\}"):
        grammar.check(_with_when({"rising": "score"}, evidence=[{"mean": "score"}]))


def test_rules_yaml_compiles():
    grammar.check(catalogue.document())


# ---- the trend operators -----------------------------------------------------------------------------------------
def test_each_trend_operator_is_a_class_with_its_doc_its_size_key_and_its_evidence_word():
    for name, op in trends.TRENDS.items():
        assert op.name == name and type(op).__doc__ and op.word
        assert op.size_key in ("by", "gt") and op.span in ("window", "log", "since")
        assert conditions.FORMS[name].optional == (op.size_key,)


def _log(values: list[float]) -> Log:
    log = Log({})
    for i, v in enumerate(values):
        log.append({"training/global_step": i, "m": v})
    return log


def _holds(spec: dict, values: list[float]) -> bool | None:
    log = _log(values)
    return conditions.compile_condition(spec, {}, {}).over(log, list(range(log.n)))


def test_the_negated_operators_hold_where_too_few_values_to_tell():
    short = [1.0, 2.0]  # below every operator's fewest values but drop's
    assert _holds({"rising": "m"}, short) is None
    assert _holds({"not_rising": "m"}, short) is True
    assert _holds({"not_improving": "m"}, short) is True
    assert _holds({"not_improving_since": "m"}, short) is True


def test_trend_down_mirrors_trend_up():
    up = [float(i) + (0.3 if i % 2 else 0.0) for i in range(20)]
    assert _holds({"trend_up": "m", "by": 0.5}, up) is True
    assert _holds({"trend_down": "m", "by": 0.5}, up) is False
    assert _holds({"trend_down": "m", "by": 0.5}, up[::-1]) is True
    assert _holds({"trend_up": "m", "by": 0.5}, up[::-1]) is False


def test_a_trend_operator_takes_the_default_size_where_none_is_given():
    rising = [1.0, 1.0, 1.0, 1.04, 1.06, 1.06]  # the last third 6 % above the first
    assert _holds({"rising": "m"}, rising) is (0.06 > tunables.TUNABLES.trend.default_size)
    assert _holds({"rising": "m", "by": 0.1}, rising) is False


# ---- the tunables ------------------------------------------------------------------------------------------------
def _tunables() -> dict:
    return yaml.safe_load(tunables.TUNABLES_PATH.read_text(encoding="utf-8"))


def test_tunables_yaml_loads():
    assert tunables.load() == tunables.TUNABLES
    trends.check_min_values(tunables.TUNABLES.trend.min_values)


@pytest.mark.parametrize(("section", "key", "value", "message"), [
    ("robust", "z_significant", -1.0, r"tunables.yaml: robust.z_significant: Input should be greater than 0"),
    ("plateau", "min_values", 30.5, r"plateau.min_values: Input should be a valid integer"),
    ("spikes", "min_values", True, r"spikes.min_values: Input should be a valid integer"),
    ("plateau", "min_value", 30, r"plateau.min_value: unknown key"),
    ("falls_from_peak", "peak_floor", None, r"falls_from_peak.peak_floor: Field required"),
    ("trend", "default_size", "small", r"trend.default_size: Input should be a valid number"),
])
def test_a_bad_tunable_is_an_error_naming_its_key(section, key, value, message):
    data = _tunables()
    if value is None:
        del data[section][key]
    else:
        data[section][key] = value
    with pytest.raises(ValueError, match=message):
        schema.tunables(data)


def test_trend_min_values_name_each_operator_and_only_them():
    named = dict(tunables.TUNABLES.trend.min_values)
    named["trend_upp"] = named.pop("trend_up")
    with pytest.raises(ValueError, match=r"trend.min_values: no value for \['trend_up'\], unknown operators "
                                         r"\['trend_upp'\]"):
        trends.check_min_values(named)
