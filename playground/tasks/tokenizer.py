"""The token tasks' one tokenizer: characters one token each, plus whole words (tags, action names) as single tokens.

Every prompt set names its vocabulary with it (`PromptSet.tokenizer`): arithmetic's digits and operators, countdown's
and calc's characters and tags, FrozenLake's board characters and actions. The ids are the specials (pad 0, bos 1,
eos 2), then the characters in the order given, then the words in the order given. The shipped SFT bases (`bases/`)
are trained on those ids, so a vocabulary's order is part of its base: tests/tasks/test_tokenizer.py holds every
task's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"


class Tokenizer:
    """Characters and whole words to ids and back; specials are never produced from text."""

    specials = (PAD, BOS, EOS)

    def __init__(self, chars: str, words: Sequence[str] = ()):
        """`chars`: the characters, one token each; `words`: strings encoded as one token wherever they occur in a
        text (a word must not be a single character of `chars`: that character would be two tokens)."""
        tokens = [*self.specials, *chars, *words]
        duplicates = sorted({t for t in tokens if tokens.count(t) > 1})
        if duplicates or "" in words:
            raise ValueError(f"a tokenizer's specials, characters and words are distinct and non-empty; "
                             f"{duplicates or ['']} repeat")
        self.chars, self.words = chars, tuple(words)
        self.itos = tokens
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        self.pad_id, self.bos_id, self.eos_id = (self.stoi[s] for s in self.specials)
        self.vocab_size = len(self.itos)
        # the longest word first, so that no word is cut by a shorter one it starts with
        longest_first = sorted(self.words, key=len, reverse=True)
        self._word_split = re.compile("(" + "|".join(map(re.escape, longest_first)) + ")") if words else None

    def encode(self, text: str) -> list[int]:
        """Text to ids: each word one token, every other character its own."""
        if self._word_split is None:
            return self._encode_chars(text)
        ids = []
        for part in self._word_split.split(text):  # words at the odd positions, the text between at the even ones
            ids += [self.stoi[part]] if part in self.words else self._encode_chars(part)
        return ids

    def _encode_chars(self, text: str) -> list[int]:
        unknown = sorted(set(text) - set(self.chars))
        if unknown:
            raise ValueError(f"cannot encode characters {unknown}; the vocabulary is {self.chars!r} + specials")
        return [self.stoi[c] for c in text]

    def decode(self, ids: Sequence[int] | torch.Tensor, stop_at_eos: bool = True) -> str:
        """Ids to text, dropping specials (like `skip_special_tokens=True`); stops at the first EOS."""
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        out = []
        for i in ids:
            if i == self.eos_id and stop_at_eos:
                break
            if i >= len(self.specials):
                out.append(self.itos[i])
        return "".join(out)
