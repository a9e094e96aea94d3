"""Token tasks for the tiny GPT: a character tokenizer, seeded prompt sets, a rule reward and pass@k.

The reward mirrors verl's GSM8K rule reward (`verl/utils/reward_score/gsm8k.py`, `compute_score`):
1.0 on an exact match, else `format_score` for a well-formed answer.
"""

from __future__ import annotations

import copy
import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from playground.config import ConfigError

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
DIGITS = "0123456789"


class Tokenizer:
    """Character-level tokenizer: specials first (pad 0, bos 1, eos 2), then digits, then operators.

    '>' separates a reverse prompt from its answer; '+', '=' and '-' serve arithmetic prompts.
    """

    specials = (PAD, BOS, EOS)
    chars = DIGITS + "+-=>"

    def __init__(self) -> None:
        self.itos = list(self.specials) + list(self.chars)
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        self.pad_id, self.bos_id, self.eos_id = (self.stoi[s] for s in self.specials)
        self.vocab_size = len(self.itos)  # 17

    def encode(self, text: str) -> list[int]:
        """Characters to ids; specials are never produced from text."""
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


@dataclass(frozen=True)
class Example:
    prompt: str  # text after BOS, e.g. "12345>"
    answer: str  # text the model must produce before EOS, e.g. "54321"


def score(
    response_text: str, answer: str, *, format_score: float = 0.0, partial_credit: bool = False
) -> dict[str, float]:
    """Rule reward for one decoded response, like verl's GSM8K `compute_score`.

    The response is the decoded text (specials dropped, cut at EOS), so EOS itself is not checked: a
    response cut by the length limit right after a correct answer still scores 1.0, as in verl.

    Args:
        response_text: decoded response.
        answer: ground-truth answer text.
        format_score: score for a wrong but well-formed response (non-empty, digits only); 0 in verl.
        partial_credit: if True, a wrong response scores the fraction of positions where it matches
            the answer, over the longer of the two lengths (so only an exact match reaches 1.0);
            the score is then the larger of that fraction and the format score.

    Returns:
        `{"score": float, "acc": float}`; `acc` is 1.0 on exact match, else 0.0.
    """
    if response_text == answer:
        return {"score": 1.0, "acc": 1.0}
    well_formed = len(response_text) > 0 and all(c in DIGITS for c in response_text)
    value = format_score if well_formed else 0.0
    if partial_credit:
        matches = sum(r == a for r, a in zip(response_text, answer, strict=False))  # stops at the shorter
        value = max(value, matches / max(len(response_text), len(answer)))
    return {"score": float(value), "acc": 0.0}


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k estimator 1 - C(n-c, k) / C(n, k) (Chen et al. 2021, arXiv:2107.03374).

    Uses the product form 1 - prod_{i=n-c+1}^{n} (1 - k/i), which never builds large binomials.

    Args:
        n: samples drawn per prompt.
        c: correct samples among them.
        k: the k of pass@k; must satisfy 1 <= k <= n.
    """
    if not 0 <= c <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 1 <= k <= n, got n={n}, k={k}")
    if n - c < k:  # every draw of k samples contains a correct one
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


class PromptSet:
    """A seeded set of (prompt, answer) examples over `Tokenizer`, split into disjoint train and val.

    Subclasses say how many operands a prompt has, how many numbers have k digits, and how to
    write an example from its operands. Examples are drawn balanced over operand lengths
    (every combination of lengths gets the same share) without repeats, so train and val never
    share a prompt.
    """

    name: ClassVar[str]
    num_operands: ClassVar[int]
    knobs: ClassVar[tuple[str, ...]] = ("min_digits", "max_digits")  # the task.* keys the constructor takes
    rule = staticmethod(score)  # the reward rule: (response_text, answer, **reward keys) -> {"score", "acc"}
    val_core_source: ClassVar[str | None] = None  # a data source logs verl's val-core/<source>/... keys

    def __init__(self, min_digits: int, max_digits: int, num_train: int | None = None, num_val: int = 512,
                 seed: int = 0):
        """Draws the examples.

        Args:
            min_digits, max_digits: operand lengths, each drawn uniformly from this range.
            num_train: training prompts; None means min(20000, distinct prompts - num_val).
            num_val: validation prompts, disjoint from the training prompts.
            seed: seeds the draw; the same knobs always give the same examples. Train and val are
                drawn together, so changing num_train also changes which prompts are in val.
        """
        if not 1 <= min_digits <= max_digits:
            raise ValueError(f"need 1 <= min_digits <= max_digits, got {min_digits}, {max_digits}")
        self.min_digits, self.max_digits = min_digits, max_digits
        lengths = range(min_digits, max_digits + 1)
        self._buckets = list(itertools.product(lengths, repeat=self.num_operands))
        self._sizes = [math.prod(self.count(k) for k in ks) for ks in self._buckets]
        if num_train is None:
            num_train = max(1, min(20000, sum(self._sizes) - num_val))  # too few prompts: the check below says so
        if num_train < 1 or num_val < 1:
            raise ValueError(f"need num_train >= 1 and num_val >= 1, got {num_train}, {num_val}")
        self.num_train, self.num_val, self.seed = num_train, num_val, seed
        self.tokenizer = Tokenizer()
        examples = self._draw_examples(num_train + num_val, random.Random(seed))
        self.val: list[Example] = examples[:num_val]
        self.train: list[Example] = examples[num_val:]

    # ---- what a subclass defines
    def count(self, k: int) -> int:
        """How many operands have k digits."""
        raise NotImplementedError

    def operand(self, k: int, index: int) -> str:
        """The index-th operand with k digits, 0 <= index < count(k)."""
        raise NotImplementedError

    def make_example(self, operands: tuple[str, ...]) -> Example:
        raise NotImplementedError

    @property
    def max_prompt_chars(self) -> int:
        raise NotImplementedError

    @property
    def max_answer_chars(self) -> int:
        raise NotImplementedError

    # ---- shared
    @property
    def config(self) -> dict[str, Any]:
        """Everything that determines the examples; used in cache keys and run configs."""
        return {"name": self.name, "min_digits": self.min_digits, "max_digits": self.max_digits,
                "num_train": self.num_train, "num_val": self.num_val, "seed": self.seed}

    @property
    def max_prompt_tokens(self) -> int:
        return 1 + self.max_prompt_chars  # BOS + text

    @property
    def max_answer_tokens(self) -> int:
        return self.max_answer_chars + 1  # text + EOS

    def prompt_ids(self, example: Example) -> list[int]:
        return [self.tokenizer.bos_id] + self.tokenizer.encode(example.prompt)

    def target_ids(self, example: Example) -> list[int]:
        return self.tokenizer.encode(example.answer) + [self.tokenizer.eos_id]

    def with_train_subset(self, max_samples: int) -> PromptSet:
        """verl's `data.train_max_samples`: RL on `max_samples` of the training prompts, picked at random (seeded by
        the set's own seed, where verl's default `data.seed: null` picks anew each run). A copy: the SFT base was
        built on the whole set, as a pretrained model has seen more than the RL data."""
        if not 1 <= max_samples <= len(self.train):
            raise ValueError(f"data.train_max_samples={max_samples} is out of range: allowed -1 (all) or 1 to "
                             f"{len(self.train)} (this task's training prompts)")
        subset = copy.copy(self)
        subset.train = random.Random(self.seed).sample(self.train, max_samples)
        return subset

    def sample(self, batch_size: int, generator: torch.Generator | None = None) -> list[Example]:
        """`batch_size` training examples drawn uniformly with replacement."""
        idx = torch.randint(len(self.train), (batch_size,), generator=generator)
        return [self.train[i] for i in idx.tolist()]

    def score(self, response_text: str, example: Example, **kwargs: Any) -> dict[str, float]:
        return self.rule(response_text, example.answer, **kwargs)

    def collate_prompts(
        self, examples: Sequence[Example], width: int | None = None, truncation: str = "error"
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Left-pads prompts to a fixed width, as verl pads to `data.max_prompt_length`.

        Args:
            examples: the prompts.
            width: padded width; None means `max_prompt_tokens` (no prompt is cut).
            truncation: for a prompt longer than `width`, as verl's `data.truncation`: "error" raises,
                "left" keeps its last `width` tokens (BOS is lost), "right" keeps its first ones.

        Returns:
            prompt_ids `(bs, width)` long and prompt_mask `(bs, width)` long.
        """
        width = self.max_prompt_tokens if width is None else width
        rows = [self.prompt_ids(e) for e in examples]
        if any(len(r) > width for r in rows):
            if truncation == "left":
                rows = [r[len(r) - width:] if len(r) > width else r for r in rows]
            elif truncation == "right":
                rows = [r[:width] for r in rows]
            else:
                longest = max(len(r) for r in rows)
                raise ValueError(f"a prompt of {longest} tokens is longer than the width {width} "
                                 f"(data.max_prompt_length) and truncation={truncation!r}; use 'left' or 'right'")
        return self._pad(rows, width, left=True)

    def collate_targets(self, examples: Sequence[Example]) -> tuple[torch.Tensor, torch.Tensor]:
        """Right-pads answer + EOS to `max_answer_tokens`: the demonstration a response should be.

        Returns:
            target_ids `(bs, max_answer_tokens)` long and target_mask `(bs, max_answer_tokens)` long.
        """
        return self._pad([self.target_ids(e) for e in examples], self.max_answer_tokens, left=False)

    def collate_sft_targets(self, examples: Sequence[Example]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The SFT demonstrations: ids, attention mask and loss mask, right-padded. The loss mask is the attention mask
        here; a multi-turn prompt set puts 0 on its environment's replies (verl's multi-turn SFT trains the
        assistant's tokens only)."""
        ids, mask = self.collate_targets(examples)
        return ids, mask, mask

    def decode_responses(self, responses: torch.Tensor) -> list[str]:
        """Decodes each row of `(bs, response_length)` token ids."""
        return [self.tokenizer.decode(row) for row in responses.tolist()]

    def _pad(self, rows: list[list[int]], width: int, left: bool) -> tuple[torch.Tensor, torch.Tensor]:
        pad = self.tokenizer.pad_id
        ids = [[pad] * (width - len(r)) + r if left else r + [pad] * (width - len(r)) for r in rows]
        mask = [[0] * (width - len(r)) + [1] * len(r) if left else [1] * len(r) + [0] * (width - len(r)) for r in rows]
        return torch.tensor(ids, dtype=torch.long), torch.tensor(mask, dtype=torch.long)

    def _draw_examples(self, total: int, rng: random.Random) -> list[Example]:
        if sum(self._sizes) < total:
            raise ValueError(f"task {self.name!r} with {self.min_digits}-{self.max_digits} digits has only "
                             f"{sum(self._sizes)} distinct prompts; num_train + num_val = {total}")
        examples = []
        for ks, size, quota in zip(self._buckets, self._sizes, _water_fill(self._sizes, total), strict=True):
            for flat in rng.sample(range(size), quota):
                operands = []
                for k in reversed(ks):  # mixed-radix digits of `flat`, one per operand
                    flat, index = divmod(flat, self.count(k))
                    operands.append(self.operand(k, index))
                examples.append(self.make_example(tuple(reversed(operands))))
        rng.shuffle(examples)
        return examples


def _water_fill(sizes: list[int], total: int) -> list[int]:
    """Splits `total` as evenly as possible over buckets, none above its size."""
    quotas = [0] * len(sizes)
    open_ = list(range(len(sizes)))
    left = total
    while left > 0:
        share, extra = divmod(left, len(open_))
        for j, i in enumerate(open_):
            quotas[i] += min(share + (j < extra), sizes[i] - quotas[i])
        left = total - sum(quotas)
        open_ = [i for i in open_ if quotas[i] < sizes[i]]
    return quotas


class ReversePrompts(PromptSet):
    """Reverse a digit string: prompt "12345>" (after BOS), answer "54321". Leading zeros allowed."""

    name = "reverse"
    num_operands = 1

    def __init__(self, min_digits: int = 5, max_digits: int = 5, **kwargs: Any):
        super().__init__(min_digits, max_digits, **kwargs)

    def count(self, k: int) -> int:
        return 10**k

    def operand(self, k: int, index: int) -> str:
        return str(index).zfill(k)

    def make_example(self, operands: tuple[str, ...]) -> Example:
        (digits,) = operands
        return Example(prompt=digits + ">", answer=digits[::-1])

    @property
    def max_prompt_chars(self) -> int:
        return self.max_digits + 1

    @property
    def max_answer_chars(self) -> int:
        return self.max_digits


class NumberPrompts(PromptSet):
    """Prompts over whole numbers: an operand of k digits has no leading zero (k = 1 is 0-9)."""

    def count(self, k: int) -> int:
        return 10 if k == 1 else 9 * 10 ** (k - 1)

    def operand(self, k: int, index: int) -> str:
        return str(index if k == 1 else 10 ** (k - 1) + index)


class AdditionPrompts(NumberPrompts):
    """Add two numbers: prompt "47+85=", answer "231", the sum 132 written least-significant digit first.

    Each operand has min_digits..max_digits digits and no leading zero. The sum is reversed so that each answer
    digit depends only on two operand digits and the carry just emitted (it learns twice as fast: docs/tuning.md).
    """

    name = "addition"
    num_operands = 2

    def __init__(self, min_digits: int = 3, max_digits: int = 3, **kwargs: Any):
        super().__init__(min_digits, max_digits, **kwargs)

    def make_example(self, operands: tuple[str, ...]) -> Example:
        a, b = operands
        return Example(prompt=f"{a}+{b}=", answer=str(int(a) + int(b))[::-1])

    @property
    def max_prompt_chars(self) -> int:
        return 2 * self.max_digits + 2

    @property
    def max_answer_chars(self) -> int:
        return self.max_digits + 1  # a carry out of the top digit adds one


PROMPT_SETS: dict[str, type[PromptSet]] = {"reverse": ReversePrompts, "addition": AdditionPrompts}


def make_prompts(name: str, **knobs: Any) -> PromptSet:
    """The prompt set `task.name` names, with its knobs (`PromptSet.knobs`), `num_train`, `num_val`, `seed`
    (countdown's: `prompt_sets.PROMPT_SETS`).

    Raises:
        ConfigError: an unknown name (checked before any model is built).
    """
    if name not in PROMPT_SETS:
        raise ConfigError(f"task.name={name!r} is out of range for token tasks: allowed one of {sorted(PROMPT_SETS)}")
    return PROMPT_SETS[name](**knobs)
