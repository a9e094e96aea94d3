"""Tests for `playground/teach/i18n.py`: {en, zh} pairs and the strings files."""

from __future__ import annotations

from playground.teach import i18n
from playground.teach.workshop import EXERCISES_DIR, say


def test_pairs_fall_back_to_english_and_keys_to_themselves():
    assert i18n.pick({"en": "a", "zh": "乙"}, "zh") == "乙" and i18n.pick({"en": "a"}, "zh") == "a"
    assert i18n.pick(None, "en") == "" and i18n.pick(3, "zh") == "3"
    assert i18n.text("samples_at", "zh", step=5, n=2) == "第 5 步：2 个样本"
    assert i18n.text("err_missing", "en", path="x") == "Nothing at x."  # a field may be called path
    assert i18n.text("no_such_key", "zh") == "no_such_key"


def test_the_workshop_messages_are_a_strings_file_too():
    assert set(i18n.table(EXERCISES_DIR / "messages.yaml")["bar_ok"]) == {"en", "zh"}
    assert say("bar_ok", "en", metric="m", value=1, bar=2) == "✓ Score: m reached 1 (bar 2)."
