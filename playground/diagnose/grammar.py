"""The rules' grammar as the compiler knows it: rules.yaml's header, written from the compiler's own tables, and the
check that every condition and series of rules.yaml compiles.

    python -m playground.diagnose.grammar            # print the grammar
    python -m playground.diagnose.grammar --write    # write it into rules.yaml, between its markers
    python -m playground.diagnose.grammar --check    # exit 1 where rules.yaml's copy is not today's

What it writes comes from where each thing is defined: the file's sections and a rule's keys are the pydantic
schema's descriptions (schema.Document, schema.RuleSpec), the kinds `schema.KINDS`, the series forms and built-ins
`series.FORMS` and `series.BUILTIN_DOC`, the conditions `conditions.FORMS` (the trend operators' docs are their
classes', trends.py; the shapes' theirs, shapes.py), their sizes filled in from tunables.yaml. A form the compiler
accepts is therefore documented, and a rule that writes anything else fails to load (`check`).
"""

from __future__ import annotations

import argparse
import functools
import sys
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from playground.diagnose import schema
from playground.diagnose.conditions import FORMS as CONDITIONS
from playground.diagnose.conditions import compile_condition
from playground.diagnose.series import BUILTIN_DOC, compile_series
from playground.diagnose.series import FORMS as SERIES
from playground.diagnose.tunables import TUNABLES
from playground.metrics import fmt

RULES_PATH = Path(__file__).with_name("rules.yaml")  # catalogue.document() reads it
WIDTH = 120
BEGIN = "# ---- the grammar: `python -m playground.diagnose.grammar --write` writes it from the compiler's tables ----"
END = "# ---- end of the grammar " + "-" * (WIDTH - len("# ---- end of the grammar "))
GROUPS = {
    "step": "Step predicates (judged at one step; a missing value makes one unknown unless `missing` says what to "
            "assume):",
    "logic": "Combined (three-valued logic; a rule fires on true only):",
    "window": "Window conditions (judged on the rule's window; a step predicate alone is judged at the window's last "
              "step; a trend operator's `by` or `gt` defaults to {trend.default_size}; the sizes quoted below are "
              "tunables.yaml's):",
}


def _filled(text: str) -> str:
    """`text` with its `{section.key}` fields from tunables.yaml."""
    return text.format_map({name: getattr(TUNABLES, name) for name in schema.Tunables.model_fields})


def _item(head: str, text: str, column: int) -> list[str]:
    """`head` with `text` beside it from `column` on (below it where the head is wider), wrapped."""
    first, hang = f"#   {head}", "#" + " " * (column - 1)

    def wrap(start: str) -> list[str]:
        return textwrap.wrap(text, WIDTH, initial_indent=start, subsequent_indent=hang, break_long_words=False,
                             break_on_hyphens=False)

    if len(first) < column:
        return wrap(first.ljust(column))
    return [first, *wrap(hang)]


def _title(text: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent="# ", subsequent_indent="#   ", break_on_hyphens=False)


def _fields(model: type[schema.BaseModel]) -> dict[str, str]:
    return {name: field.description or "" for name, field in model.model_fields.items()}


def header() -> str:
    """The grammar block of rules.yaml's header, markers included."""
    lines = [BEGIN, "# Sections:"]
    lines += [row for name, text in _fields(schema.Document).items() for row in _item(name, text, 18)]
    lines += ["#", "# A rule's keys:"]
    lines += [row for name, text in _fields(schema.RuleSpec).items() for row in _item(name, text, 17)]
    lines += ["# Its kind, how `when` is judged:"]
    lines += [row for name, text in schema.KINDS.items() for row in _item(name, text, 17)]
    lines += ["#", *_title("Series (one value per step, or unknown): a metric name (val/* metrics are carried forward "
                           "to later steps), a name under `series:`, a built-in, a number (a constant), or")]
    lines += [row for form in SERIES.values() for row in _item(form.synopsis, form.doc, 33)]
    lines += ["# Built in (they need the run's facts):"]
    lines += [row for name, text in BUILTIN_DOC.items() for row in _item(name, text, 20)]
    for group, title in GROUPS.items():
        lines += ["#", *_title(_filled(title))]
        lines += [row for form in CONDITIONS.values() if form.group == group
                  for row in _item(form.synopsis, _filled(form.doc), 33)]
    return "\n".join([*lines, END]) + "\n"


def replaced(text: str) -> str:
    """rules.yaml's text with today's grammar between its markers."""
    lines = text.splitlines(keepends=True)
    starts = [k for k, line in enumerate(lines) if line.rstrip("\n") == BEGIN]
    ends = [k for k, line in enumerate(lines) if line.rstrip("\n") == END]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise ValueError(f"rules.yaml: the grammar's markers, once each in order, not found:\n{BEGIN}\n{END}")
    return "".join(lines[:starts[0]]) + header() + "".join(lines[ends[0] + 1:])


# ---- the check of a parsed rules.yaml -------------------------------------------------------------------------------
def _compiles(where: str, build: Callable[[], Any], source: str) -> None:
    try:
        build()
    except (ValueError, TypeError, KeyError) as e:
        message = str(e).removeprefix("rules.yaml: ")
        raise ValueError(f"{source}: {where}: {message}") from None


def _judged(spec: Mapping[str, Any], defs: Mapping[str, Any], guards: Mapping[str, Any]) -> Callable[[], Any]:
    """A rule's (an artifact's) condition and series, compiled with its own thresholds at the guide's values."""
    thresholds = {name: (float(value), fmt(float(value))) for name, value in spec.get("thresholds", {}).items()}

    def build() -> None:
        compile_condition(spec["when"], defs, thresholds, guards)
        for series in [*spec.get("metrics", []), *spec.get("evidence", [])]:
            compile_series(series, defs)

    return build


def check(data: Mapping[str, Any], source: str = "rules.yaml") -> None:
    """Compile every condition and series of a parsed (and `schema.check`ed) rules.yaml: a ValueError naming the
    rule (series, artifact, verdict) where one is written in no form the compiler takes."""
    defs, guards = data.get("series", {}), data.get("guards", {})
    for name, spec in defs.items():
        _compiles(f"series {name!r}", functools.partial(compile_series, spec, defs), source)
    for kind, specs in (("rule", data["rules"]), ("artifact", data.get("artifacts", []))):
        for spec in specs:
            _compiles(f"{kind} {spec['name']!r}", _judged(spec, defs, guards), source)
    for spec in data["verdicts"]:  # judged without named series, thresholds or guards (verdicts.py)
        _compiles(f"verdict {spec['name']!r}", functools.partial(compile_condition, spec["when"], {}, {}), source)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m playground.diagnose.grammar", description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help="write the grammar into rules.yaml, between its markers")
    action.add_argument("--check", action="store_true", help="exit 1 where rules.yaml's grammar is not today's")
    args = parser.parse_args(argv)
    if not (args.write or args.check):
        sys.stdout.write(header())
        return 0
    text = RULES_PATH.read_text(encoding="utf-8")
    new = replaced(text)
    if args.check:
        if new != text:
            print(f"{RULES_PATH}: its grammar is not the compiler's: run python -m playground.diagnose.grammar --write",
                  file=sys.stderr)
            return 1
        return 0
    RULES_PATH.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
