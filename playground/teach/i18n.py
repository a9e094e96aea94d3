"""Text in English and Chinese: `{en, zh}` pairs, and tables of them kept in YAML data files.

The explorer's UI strings are `ui_strings.yaml` (beside the glossary), the workshop's messages
`exercises/messages.yaml`; a glossary entry or a finding carries its own pairs. A missing Chinese text falls back to
the English one, a missing key to the key itself (a page still renders).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

LANGS = ("en", "zh")
UI_STRINGS_PATH = Path(__file__).with_name("ui_strings.yaml")


@functools.lru_cache(maxsize=8)
def table(path: str | Path = UI_STRINGS_PATH) -> dict[str, dict[str, str]]:
    """A strings file (key -> {en, zh}), read once per process."""
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f) or {}


def pick(pair: object, lang: str) -> str:
    """`lang`'s half of an {en, zh} pair (English when it has none); a plain value as text, None as ""."""
    if isinstance(pair, Mapping):
        return str(pair.get(lang) or pair.get("en") or "")
    return "" if pair is None else str(pair)


def text_in(path: str | Path, key: str, lang: str, /, **fields: Any) -> str:
    """The string `key` of a strings file in `lang`, its `{field}`s filled (any field name, `path` too)."""
    words = pick(table(path).get(key), lang) or key
    return words.format(**fields) if fields else words


def text(key: str, lang: str, /, **fields: Any) -> str:
    """The explorer's UI string `key` (`ui_strings.yaml`) in `lang`."""
    return text_in(UI_STRINGS_PATH, key, lang, **fields)


def time_left(seconds: float | None, lang: str) -> str:
    """`~12 min left` (90 s and more), `~40 s left`, or that it is still being estimated (None): an SFT base's build,
    said on the terminal (`tasks.base_build`) and in the explorer alike."""
    if seconds is None:
        return text("base_eta_unknown", lang)
    if seconds >= 90:
        return text("base_eta_min", lang, n=round(seconds / 60))
    return text("base_eta_s", lang, n=round(seconds))
