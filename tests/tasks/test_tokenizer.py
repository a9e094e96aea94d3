"""The one tokenizer (`tasks/tokenizer.py`): characters plus whole words, and every token task's vocabulary as its
shipped SFT base (`bases/`) was trained on: the same tokens in the same order, so the same ids."""

from __future__ import annotations

import pytest

from playground.tasks.prompt_sets import PROMPT_SETS
from playground.tasks.tokenizer import Tokenizer

SPECIALS = ["<pad>", "<bos>", "<eos>"]
ARITHMETIC = [*SPECIALS, *"0123456789", "+", "-", "=", ">"]
# read from the tokenizer classes each task had before issue 40 (CountdownTokenizer, CalcTokenizer,
# FrozenLakeTokenizer, token_data.Tokenizer); the bases' weights index their embeddings by these ids
VOCABULARIES = {
    "reverse": ARITHMETIC,
    "addition": ARITHMETIC,
    "countdown": [*SPECIALS, *"0123456789", "+", "-", "*", "/", "(", ")", "=", ",", ";", ">", " ",
                  "<think>", "</think>", "<answer>", "</answer>"],
    "calc": [*SPECIALS, *"0123456789", "*", "=", "?",
             "<tool>", "</tool>", "<result>", "</result>", "<answer>", "</answer>"],
    "frozenlake": [*SPECIALS, "P", "_", "O", "G", "X", "√", "\n", "Left", "Down", "Right", "Up"],
}


def test_every_task_keeps_the_vocabulary_its_base_was_trained_on():
    assert set(PROMPT_SETS) == set(VOCABULARIES)
    for name, cls in PROMPT_SETS.items():
        tok = cls.tokenizer
        assert tok.itos == VOCABULARIES[name], name
        assert tok.vocab_size == len(VOCABULARIES[name]) and (tok.pad_id, tok.bos_id, tok.eos_id) == (0, 1, 2)


def test_words_are_one_token_wherever_they_occur():
    tok = Tokenizer("ab", words=("<x>", "</x>", "<xy>"))
    assert tok.itos == [*SPECIALS, "a", "b", "<x>", "</x>", "<xy>"]
    ids = tok.encode("a<x>b</x><xy>ab")
    assert [tok.itos[i] for i in ids] == ["a", "<x>", "b", "</x>", "<xy>", "a", "b"]
    assert tok.decode(ids) == "a<x>b</x><xy>ab"


def test_a_longer_word_is_not_cut_by_a_shorter_one_it_starts_with():
    tok = Tokenizer("ab", words=("Up", "Upper"))
    assert [tok.itos[i] for i in tok.encode("UpperUp")] == ["Upper", "Up"]


def test_text_outside_the_vocabulary_names_its_characters():
    with pytest.raises(ValueError, match=r"cannot encode characters \['<', 'c'\]"):
        Tokenizer("ab", words=("<x>",)).encode("a<c")


@pytest.mark.parametrize("chars, words", [("aa", ()), ("ab", ("a",)), ("ab", ("<eos>",)), ("ab", ("",))])
def test_a_token_is_given_once(chars, words):
    with pytest.raises(ValueError, match="distinct and non-empty"):
        Tokenizer(chars, words)
