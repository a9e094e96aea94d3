"""Hydra override strings (`key=value`, `+key=value`, `++key=value`, `~key`, `key=a,b`) read in one place.

Hydra's own grammar (`OverridesParser`) decides what an override is: its kind (change, add, force-add, delete) and
whether it sweeps. Key and value are kept as written (the text either side of the first `=`), so a value reads as
the user typed it (`1e-3`, not Hydra's `0.001`). `parse` is lenient: a string Hydra refuses (a run's overrides read
back from an older `run.json`, a value with an unquoted `=`) is still split at its first `=`, marked `parsed=False`;
`parse_strict` refuses it in one line.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from playground import PYTHON

if TYPE_CHECKING:
    from hydra.core.override_parser.overrides_parser import OverridesParser

PREFIXES = ("++", "+", "~")  # force-add, add, delete (longest first)
DELETED = "(deleted)"  # the value `key_values` gives a `~key`
ABSENT = object()  # what `lookup` gives for a key the config does not hold (None is a value: a null key)


class OverrideError(ValueError):
    """An override Hydra's grammar refuses (the message is one line; Hydra's spans several)."""


@dataclass(frozen=True)
class Override:
    text: str  # as written
    key: str  # the config key or group, without its prefix or package (`trainer.seed`, `hydra/launcher`)
    package: str | None  # `key@package=...`'s package
    value: str | None  # the text after the first `=`; None when there is no `=` (`~key`)
    prefix: str  # "", "+", "++" or "~"
    sweep: bool  # several values: `a=1,2`, `range(...)`, `choice(...)`
    choices: tuple[str, ...]  # the values it takes: a sweep's each (Hydra's text of them), else the one value
    parsed: bool  # whether Hydra's grammar accepts it

    @property
    def is_delete(self) -> bool:
        return self.prefix == "~"

    @property
    def plain(self) -> bool:
        """`key=value` with no prefix: the form that sets an existing key or picks a config group's option."""
        return not self.prefix and self.value is not None


@lru_cache(maxsize=1)
def _parser() -> OverridesParser:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


def _split(text: str) -> tuple[str, str, str | None, str | None]:
    """(prefix, key, package, value) either side of the first `=`, as written."""
    head, sep, value = text.partition("=")
    prefix = next((p for p in PREFIXES if head.startswith(p)), "")
    key, at, package = head[len(prefix):].partition("@")
    return prefix, key, package if at else None, value if sep else None


@lru_cache(maxsize=8192)  # the explorer reads every run's overrides on every page: each string is parsed once
def _parse(text: str) -> tuple[Override, str | None]:
    prefix, key, package, value = _split(text)
    try:
        hydra_override = _parser().parse_overrides([text])[0]
    except Exception as error:  # noqa: BLE001 - Hydra raises its own exception types, with multi-line messages
        why = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return Override(text, key, package, value, prefix, False, () if value is None else (value,), False), why
    sweep = hydra_override.is_sweep_override()
    choices: tuple[str, ...] = () if value is None else (value,)
    if sweep:
        try:
            choices = tuple(hydra_override.sweep_string_iterator())
        except Exception:  # noqa: BLE001 - an interval sweep has no list of values
            choices = ()
    return Override(text, hydra_override.key_or_group, hydra_override.package or None, value, prefix, sweep,
                    choices, True), None


def parse(text: str) -> Override:
    """One override, read leniently (see the module's note)."""
    return _parse(str(text).strip())[0]


def parse_strict(text: str) -> Override:
    """One override as Hydra takes it; raises OverrideError when Hydra's grammar refuses it."""
    override, why = _parse(str(text).strip())
    if not override.parsed:
        raise OverrideError(f"{override.text!r} is no Hydra override ({why})")
    return override


def parse_all(overrides: Iterable[str] | None) -> list[Override]:
    return [parse(o) for o in overrides or ()]


def key_values(overrides: Iterable[str] | None) -> dict[str, str]:
    """{key: value as written}, the last override of a key winning; a `~key` gives DELETED."""
    return {o.key: DELETED if o.is_delete or o.value is None else o.value for o in parse_all(overrides)}


def with_replaced(base: Iterable[str], top: Iterable[str]) -> list[str]:
    """`base` without the overrides of a key `top` sets, then `top`: valid for Hydra whether or not it lets a later
    override of the same key win, and as short as it gets."""
    top = [str(o) for o in top]
    keys = {parse(o).key for o in top}
    return [str(o) for o in base if parse(o).key not in keys] + top


def value_of(overrides: Iterable[str] | None, key: str) -> str | None:
    """The value the plain override `key=value` gives (the last one), None without one."""
    values = [o.value for o in parse_all(overrides) if o.plain and o.key == key]
    return values[-1] if values else None


def command(overrides: Iterable[str], module: str = "playground.train") -> str:
    """`.venv/bin/python -m <module> <overrides>` as a user pastes it into a fresh shell, each argument shell-quoted."""
    return " ".join([f"{PYTHON} -m {module}", *(shlex.quote(o) for o in overrides)])


def fix_command(overrides: Iterable[str], fix: str, module: str = "playground.train") -> str:
    """The command line that reruns a run's config with a finding's fix applied.

    The fix's overrides come last and replace any run override of the same key, so the result is valid
    for Hydra whether or not it lets a later override win.

    Args:
        overrides: the run's Hydra overrides (`run.json` "overrides").
        fix: the finding's fix, Hydra overrides separated by spaces.

    Returns:
        `.venv/bin/python -m playground.train <run overrides> <fix overrides>`, each argument shell-quoted.
    """
    return command(with_replaced(overrides or (), shlex.split(fix or "")), module)


def lookup(config: Mapping[str, Any] | None, key: str) -> Any:
    """The value an override's dotted key (`a.b.c`) names in a plain nested dict, or `ABSENT`."""
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return ABSENT
        node = node[part]
    return node
