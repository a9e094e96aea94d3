"""The base of every condition `rules.yaml` names: the step predicates and window conditions of `conditions`, the
trend operators of `trends` and the shapes of a whole series (`shapes`), which `conditions` builds and so cannot be
imported by; and `Form`, one entry of the vocabulary's tables (conditions.FORMS, series.FORMS), from which the
compilers build and rules.yaml's header is written (grammar.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from playground.diagnose.log import Log


class Node:
    """A condition. `at(log, i)`: a step predicate at record i; `over(log, idx)`: judged on a window."""

    def at(self, log: Log, i: int) -> bool | None:
        raise TypeError(f"{type(self).__name__} is a window condition, not a step predicate")

    def over(self, log: Log, idx: Sequence[int]) -> bool | None:
        return self.at(log, idx[-1]) if idx else None

    def evidence(self, log: Log, idx: Sequence[int]) -> list[dict]:
        return []


@dataclass(frozen=True)
class Form:
    """A form of the rules' vocabulary: a mapping named by its `head` key, the other keys it takes, what it means
    and how it is built (`build(spec, compiler)`)."""

    head: str
    synopsis: str  # how a rule writes it
    doc: str  # what it means: rules.yaml's header says it (grammar.py), its `{section.key}` filled from tunables.yaml
    build: Callable[[Mapping[str, Any], Any], Any]
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    one_of: tuple[str, ...] = ()  # exactly one of these keys (a comparison's operator)
    group: str = ""  # the header's list it is in


def form_of(spec: Any, forms: Mapping[str, Form], what: str) -> Form:
    """The form `spec` is written in: exactly one head key of `forms`, its required keys, and no key it does not take
    (a ValueError naming the spec otherwise)."""
    if not isinstance(spec, Mapping):
        raise ValueError(f"rules.yaml: a {what} is a mapping, not {spec!r}")
    heads = [key for key in spec if key in forms]
    if len(heads) != 1:
        raise ValueError(f"rules.yaml: unknown {what} {spec!r}: names " + (
            f"{len(heads)} forms ({', '.join(heads)})" if heads else f"none of {', '.join(forms)}"))
    form = forms[heads[0]]
    keys = set(spec) - {form.head}
    takes = [*form.required, *form.optional, *form.one_of]
    if unknown := sorted(map(str, keys - set(takes))):
        raise ValueError(f"rules.yaml: {what} {spec!r}: unknown key {', '.join(unknown)} ({form.head} takes "
                         f"{', '.join(takes) or 'no other key'})")
    if missing := [key for key in form.required if key not in spec]:
        raise ValueError(f"rules.yaml: {what} {spec!r}: {form.head} needs {', '.join(missing)}")
    if form.one_of and len(keys & set(form.one_of)) != 1:
        raise ValueError(f"rules.yaml: {what} {spec!r}: {form.head} takes exactly one of {', '.join(form.one_of)}")
    return form
