"""Token tasks for the tiny GPT: the prompt set contract (`PromptSet`), the arithmetic prompt sets, a rule reward and
pass@k.

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

from playground.rollout.turns import Episode
from playground.tasks.tokenizer import Tokenizer

DIGITS = "0123456789"
ARITHMETIC_CHARS = DIGITS + "+-=>"  # '>' ends a reverse prompt; '+', '=' and '-' serve arithmetic prompts


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
    """A token task's data and what it declares about itself: the contract the token task (`token_task`), its SFT base
    (`sft`) and the config checks (`prompt_sets.check_config`) read, and nothing else of it.

    The constructor draws seeded examples, disjoint `train` and `val`, from the `task.*` keys named in `knobs` (and
    `task.num_val`, `task.data_seed`); an example's SFT demonstration is `target_ids` (`collate_sft_targets`: with
    its loss mask). Declared as class attributes:
    - `tokenizer`: its vocabulary, one `Tokenizer(chars, words)`; the order of its ids is its SFT base's.
    - single- or multi-turn: `multi_turn`. A multi-turn set also names `turn_end_tokens` (tokens of its tokenizer
      that end an assistant turn) and defines `new_episode(example) -> episodes.Episode`, its environment; a
      single-turn set has neither. Checked when the class is defined.
    - its reward: a single-turn set scores each decoded response by `rule(response_text, answer, format_score=,
      partial_credit=) -> {"score", "acc"}`, the rule `reward.name` names (`reward_name`), which takes
      `reward.partial_credit` only where `partial_credit` says so. A multi-turn set's reward is its episodes'
      outcome (`Episode.outcome`): its `rule` scores nothing in RL; `reward.format_score`, `partial_credit` stay off.
    - its validation: every set logs `val/score`, `val/accuracy` (the rule's or the outcome's `acc`) and `val/pass@k`
      on `val`; a set with a `val_core_source` also logs verl's `val-core/<source>/reward/*` (its
      `val_core_metrics`). Checked when the class is defined.
    """

    name: ClassVar[str]  # `task.name`, its key in `prompt_sets.PROMPT_SETS`
    knobs: ClassVar[tuple[str, ...]]  # the task.* keys the constructor takes
    tokenizer: ClassVar[Tokenizer]
    multi_turn: ClassVar[bool] = False
    turn_end_tokens: ClassVar[tuple[str, ...]] = ()  # multi-turn only
    rule = staticmethod(score)  # the reward rule: (response_text, answer, **reward keys) -> {"score", "acc"}
    reward_name: ClassVar[str] = "exact_match"  # what reward.name must say: the rule's name
    partial_credit: ClassVar[bool] = True  # whether the rule takes reward.partial_credit
    val_core_source: ClassVar[str | None] = None  # a data source logs verl's val-core/<source>/... keys

    train: list[Example]
    val: list[Example]
    num_train: int
    num_val: int
    seed: int

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        problems = _contract_problems(cls)
        if problems:
            raise TypeError(f"prompt set {cls.__name__} breaks the PromptSet contract: {'; '.join(problems)} "
                            "(docs/adding-a-task.md, \"A prompt set\")")

    # ---- what a subclass defines
    @property
    def config(self) -> dict[str, Any]:
        """Everything that determines the examples; used in cache keys and run configs."""
        raise NotImplementedError

    @property
    def max_prompt_chars(self) -> int:
        raise NotImplementedError

    @property
    def max_answer_chars(self) -> int:
        raise NotImplementedError

    def new_episode(self, example: Example) -> Episode:
        """A multi-turn set's environment for one response (a fresh one per row: a group's rows never share one)."""
        raise NotImplementedError(f"{type(self).__name__} is single-turn: it has no episodes")

    def val_core_metrics(self, texts: Sequence[str], scores: Sequence[Sequence[float]]) -> dict[str, float]:
        """verl's `val-core/<val_core_source>/reward/*` of the validation's responses (texts, and their rule scores
        `(prompts, N)`); a set with a `val_core_source` defines it."""
        raise NotImplementedError(f"{type(self).__name__} has no val_core_source")

    # ---- shared
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


def _contract_problems(cls: type[PromptSet]) -> list[str]:
    """What a prompt set class declares that its contract does not allow (empty when it keeps it)."""
    problems = []
    episodes = cls.new_episode is not PromptSet.new_episode
    if cls.multi_turn:
        if not episodes:
            problems.append("multi_turn=True needs new_episode(example) -> Episode")
        if not cls.turn_end_tokens:
            problems.append("multi_turn=True needs turn_end_tokens (the tokens that end an assistant turn)")
        vocabulary = cls.tokenizer.stoi if "tokenizer" in dir(cls) else {}  # no tokenizer: no tokens
        unknown = [t for t in cls.turn_end_tokens if t not in vocabulary]
        if unknown:
            problems.append(f"turn_end_tokens {unknown} are not tokens of its tokenizer")
    elif episodes or cls.turn_end_tokens:
        problems.append("new_episode and turn_end_tokens belong to a multi-turn set: declare multi_turn=True")
    core = cls.val_core_metrics is not PromptSet.val_core_metrics
    if (cls.val_core_source is not None) != core:
        problems.append("val_core_source and val_core_metrics go together")
    return problems


class OperandPrompts(PromptSet):
    """Examples drawn from their operands: subclasses say how many operands a prompt has, how many numbers have k
    digits, and how to write an example from its operands. Examples are drawn balanced over operand lengths (every
    combination of lengths gets the same share) without repeats, so train and val never share a prompt.
    """

    num_operands: ClassVar[int]
    knobs: ClassVar[tuple[str, ...]] = ("min_digits", "max_digits")

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
    def config(self) -> dict[str, Any]:
        return {"name": self.name, "min_digits": self.min_digits, "max_digits": self.max_digits,
                "num_train": self.num_train, "num_val": self.num_val, "seed": self.seed}

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


class ReversePrompts(OperandPrompts):
    """Reverse a digit string: prompt "12345>" (after BOS), answer "54321". Leading zeros allowed."""

    name = "reverse"
    num_operands = 1
    tokenizer = Tokenizer(ARITHMETIC_CHARS)

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


class NumberPrompts(OperandPrompts):
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
    tokenizer = Tokenizer(ARITHMETIC_CHARS)

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
