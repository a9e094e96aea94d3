"""Overrides that name a key the composed config does not hold, and the real keys nearest to it.

Hydra refuses `lr=abc` with "use +lr=abc", and `+lr=abc` then adds a top-level `lr` that nothing reads: a run at the
default learning rate that says nothing. Here both spellings (and `++lr`, `~lr`) are one line naming the key and the
nearest real ones (`actor_rollout_ref.actor.optim.lr`), before any compute. Config *groups* (`task=`, `+debug=tiny`,
`+sweep=lr`) choose files, not keys, and `hydra.*` is Hydra's own: neither is checked here.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

from playground.config.overrides import Override, parse_all

MAX_NEAREST = 3  # the error names at most this many real keys


def config_keys(cfg: DictConfig) -> list[str]:
    """Every dotted key of `cfg`, nodes and leaves, in the config's order (the `hydra` node left out)."""
    keys: list[str] = []

    def walk(node: Any, prefix: str) -> None:
        for key, child in node.items():
            dotted = f"{prefix}{key}"
            keys.append(dotted)
            if isinstance(child, dict):
                walk(child, f"{dotted}.")

    plain = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(plain, dict)
    plain.pop("hydra", None)
    walk(plain, "")
    return keys


def is_key_override(override: Override, groups: Collection[str]) -> bool:
    """Whether an override names a config key (checked here), not a config group or one of Hydra's own settings."""
    root = override.key.split(".")[0].split("/")[0]
    return bool(override.key) and root != "hydra" and "/" not in override.key and override.key not in groups


def nearest_keys(key: str, keys: Sequence[str], n: int = MAX_NEAREST) -> list[str]:
    """The real keys nearest to `key`: those ending in the same last component (the ones whose path is closest to
    `key`'s path first, else in the config's order), then those whose last component is close to it; failing both,
    the keys whose whole name is close to it (`trainer.total_steps` -> `trainer.total_training_steps`)."""
    head, _, leaf = key.rpartition(".")
    order = {k: i for i, k in enumerate(keys)}

    def path_likeness(candidate: str) -> float:
        return difflib.SequenceMatcher(None, head, candidate.rpartition(".")[0]).ratio() if head else 0.0

    same_leaf = sorted((k for k in keys if k.rpartition(".")[2] == leaf), key=lambda k: (-path_likeness(k), order[k]))
    leaves = difflib.get_close_matches(leaf, sorted({k.rpartition(".")[2] for k in keys}), n=n, cutoff=0.75)
    close_leaf = sorted((k for k in keys if k.rpartition(".")[2] in leaves and k not in same_leaf),
                        key=lambda k: (leaves.index(k.rpartition(".")[2]), -path_likeness(k), order[k]))
    found = list(dict.fromkeys([*same_leaf, *close_leaf]))  # a long shared path makes any whole names look alike
    return found[:n] or difflib.get_close_matches(key, keys, n=n, cutoff=0.75)


def unknown_key_error(overrides: Iterable[Override], keys: Sequence[str], groups: Collection[str]) -> str | None:
    """One line for the first override that names a key `keys` lacks (with or without `+`), else None."""
    known = set(keys)
    for override in overrides:
        if not is_key_override(override, groups) or override.key in known:
            continue
        near = nearest_keys(override.key, keys)
        hint = f"nearest: {', '.join(near)}" if near else "`python -m playground.train --cfg job` lists the keys"
        return f"{override.text}: the config has no key {override.key!r} (nothing would read it); {hint}"
    return None


def unknown_key_line(overrides: Sequence[str], groups: Collection[str],
                     keys_of: Callable[[tuple[str, ...]], Sequence[str]]) -> str | None:
    """The line for the first override of a key the composed config does not hold (`lr=abc`, `+lr=0.01`), or None.

    `keys_of(group overrides)`: the keys of the config those compose. The keys checked against are those of the config
    the overrides' groups compose (each value of a swept group's); where that config does not compose (a group Hydra
    refuses), None: Hydra's own error says why when it composes.
    """
    parsed = parse_all(overrides)
    if not any(is_key_override(o, groups) for o in parsed):
        return None
    chosen = [o for o in parsed if o.key in groups]
    keys: dict[str, None] = {}
    for variant in _group_variants(chosen):
        try:
            keys.update(dict.fromkeys(keys_of(variant)))
        except Exception:  # noqa: BLE001 - Hydra's own exception types: its message comes when it composes
            return None
    return unknown_key_error(parsed, list(keys), groups)


def _group_variants(chosen: Sequence[Override]) -> list[tuple[str, ...]]:
    """The group overrides with each sweep at its first value, then once per other value of each swept group."""
    def text(o: Override, value: str) -> str:
        return f"{o.prefix}{o.key}{'@' + o.package if o.package else ''}={value}"

    first = [text(o, o.choices[0]) if o.sweep and o.choices else o.text for o in chosen]
    variants = [tuple(first)]
    for i, o in enumerate(chosen):
        if o.sweep:
            variants += [tuple([*first[:i], text(o, value), *first[i + 1:]]) for value in o.choices[1:]]
    return variants


ABSENT = "(absent)"  # a key one config has and the other lacks


def flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """A plain nested config as `dotted.key -> value` (lists stay whole; an empty mapping stays a key)."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out if out or not prefix else {prefix[:-1]: {}}
    return {prefix[:-1]: node}


def config_diff(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """Keys whose values differ between two flattened configs: `(key, value in a, value in b)`, sorted."""
    keys = sorted(set(a) | set(b))
    return [(k, a.get(k, ABSENT), b.get(k, ABSENT)) for k in keys if a.get(k, ABSENT) != b.get(k, ABSENT)]
