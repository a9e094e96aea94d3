"""Countdown (TinyZero's task) for the tiny GPT: prompts, an exhaustive solver and the SFT traces it writes.

A prompt gives 3 (or 4) numbers and a target, "3,7,8>53" after BOS; a response is a scratchpad and an equation,
`<think>7+8=15,15*3=45;8*7=56,56-3=53</think><answer>(8*7)-3</answer>` then EOS, scored by TinyZero's rule
(`countdown_reward`). The four tags are single tokens; the rest is characters.

Problems are every (multiset of numbers, reachable target) pair; they are shuffled with the seed and the first
`num_val` are validation, the rest training, so a validation problem (its numbers as a set and its target) never
appears in training, in any order of its numbers (a multiset can appear on both sides with different targets).

The SFT traces are what makes the base diverse: an attempt picks all steps but the last (a "prefix", leaving two
values) and then the last step. A failed attempt takes a dead prefix (no operation on its two values reaches the
target) and any last step; a successful one a live prefix and a last step that reaches the target. A trace is
0..`max_failed` failed attempts, then a successful one, its expression in the answer; with probability `wrong_rate`
it is 1..`max_failed` + 1 failed attempts, the last one's expression in the answer (a well-formed wrong answer).
Which prefix, which operand order of + and *, how many attempts: all drawn uniformly. With `max_rechecks` > 0 a trace
that gives up first writes its last step again, each time with probability 1/2 and at most `max_rechecks` times, as a
model unsure of its answer re-checks it ("9+12=21,9+12=21</think>"): that changes neither the answer nor the reward,
only the length. It is the room the Dr. GRPO paper's length bias needs: a length the policy chooses where its answer
is wrong (the scratchpad's last value is not the target, which the model sees), at no cost in reward. A trace that
succeeds never re-checks, so the length a right answer could drop is not mixed in.
Intermediate values are whole numbers in [0, `MAX_VALUE`] (division only when exact), as a person playing Countdown
computes.
"""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from playground.tasks import countdown_reward
from playground.tasks.countdown_reward import parse_ground_truth, prediction, score
from playground.tasks.token_data import DIGITS, Example, PromptSet
from playground.tasks.tokenizer import Tokenizer

TAGS = ("<think>", "</think>", "<answer>", "</answer>")
MAX_VALUE = 100  # intermediate values stay in [0, 100], as a player aiming at a target of at most 100 computes


# ---- the solver: a derivation is a tree, a leaf an int, a node (op, left, right, value)
Tree = Any


def value_of(tree: Tree) -> int:
    return tree if isinstance(tree, int) else tree[3]


def combine(a: Tree, b: Tree) -> list[Tree]:
    """Every node over a and b with a whole value in [0, MAX_VALUE]: + and * once, - and / in each valid order."""
    x, y = value_of(a), value_of(b)
    out = [("+", a, b, x + y), ("*", a, b, x * y)]
    out += [("-", a, b, x - y)] if x >= y else [("-", b, a, y - x)]
    out += [("/", a, b, x // y)] if y and x % y == 0 else []
    out += [("/", b, a, y // x)] if x and y % x == 0 and x != y else []
    return [node for node in out if node[3] <= MAX_VALUE]


def prefixes(values: tuple[Tree, ...]) -> list[tuple[Tree, Tree]]:
    """Every way to reduce the items to two by combining pairs (a prefix: all steps but the last)."""
    if len(values) == 2:
        return [values]
    out = []
    for i, j in itertools.combinations(range(len(values)), 2):
        rest = tuple(v for k, v in enumerate(values) if k not in (i, j))
        for node in combine(values[i], values[j]):
            out += prefixes(rest + (node,))
    return out


def expression(tree: Tree, top: bool = True) -> str:
    """The equation a tree writes, every step in parentheses but the outermost: ((7+8)*3) -> "(7+8)*3"."""
    if isinstance(tree, int):
        return str(tree)
    body = expression(tree[1], False) + tree[0] + expression(tree[2], False)
    return body if top else f"({body})"


def canonical(tree: Tree) -> str:
    """An expression with the operands of + and * sorted: equal for the same equation written in another order."""
    if isinstance(tree, int):
        return str(tree)
    left, right = canonical(tree[1]), canonical(tree[2])
    if tree[0] in "+*":
        left, right = sorted((left, right))
    return f"({left}{tree[0]}{right})"


@functools.cache
def solve(numbers: tuple[int, ...]) -> dict[int, list[Tree]]:
    """Every target reachable from the (sorted) numbers, each with its distinct solutions (by `canonical`)."""
    found: dict[int, dict[str, Tree]] = {}
    for a, b in prefixes(numbers):
        for node in combine(a, b):
            found.setdefault(node[3], {}).setdefault(canonical(node), node)
    return {target: list(trees.values()) for target, trees in found.items()}


def shuffled(tree: Tree, rng: random.Random) -> Tree:
    """The same equation with the operands of each + and * swapped with probability 1/2."""
    if isinstance(tree, int):
        return tree
    op, left, right, value = tree
    left, right = shuffled(left, rng), shuffled(right, rng)
    if op in "+*" and rng.random() < 0.5:
        left, right = right, left
    return (op, left, right, value)


def lines(tree: Tree, rng: random.Random) -> list[str]:
    """The scratchpad steps of a tree, each "7+8=15", children before parents; two independent subtrees in a random
    order."""
    if isinstance(tree, int):
        return []
    op, left, right, value = tree
    first, second = lines(left, rng), lines(right, rng)
    if rng.random() < 0.5:
        first, second = second, first
    return first + second + [f"{value_of(left)}{op}{value_of(right)}={value}"]


@dataclass(frozen=True)
class Problem:
    numbers: tuple[int, ...]  # in the prompt's order
    target: int

    @property
    def text(self) -> str:
        return ",".join(map(str, self.numbers)) + f">{self.target}"


class CountdownPrompts(PromptSet):
    """Every solvable Countdown problem over the knobs, split into disjoint train and val (see the module doc).

    An example's `prompt` and `answer` are both the problem's text "3,7,8>53": the answer is the ground truth the
    reward parses (numbers and target), since many equations are right. The SFT demonstration of an example is a
    fresh trace each time it is drawn (`target_ids`), from a generator seeded by `seed`.
    """

    name = "countdown"
    knobs = ("min_numbers", "max_numbers", "max_number", "max_target", "max_failed", "wrong_rate", "max_rechecks")
    # characters for numbers and equations (space too: TinyZero strips and evaluates it), the tags as tokens: 28 ids
    tokenizer = Tokenizer(DIGITS + "+-*/()=,;> ", words=TAGS)
    rule = staticmethod(score)  # TinyZero's
    reward_name = "countdown"
    partial_credit = False  # many equations are right: no per-position credit
    val_core_source = "countdown"

    def __init__(self, min_numbers: int = 3, max_numbers: int = 3, max_number: int = 9, max_target: int = 100,
                 max_failed: int = 2, wrong_rate: float = 0.1, max_rechecks: int = 0, num_train: int | None = None,
                 num_val: int = 128, seed: int = 0):
        """Enumerates and splits the problems.

        Args:
            min_numbers, max_numbers: numbers per prompt, 3 or 4.
            max_number: the numbers are drawn from 1..max_number (repeats allowed).
            max_target: targets are the reachable values in 1..max_target.
            max_failed: most failed attempts before the successful one in a trace.
            wrong_rate: the share of traces that give up with a failed attempt's (wrong) equation.
            max_rechecks: most times a trace that gives up writes its last step again before answering (0: never).
            num_train: training problems; None means all that are not in val.
            num_val: validation problems.
            seed: the shuffle of the problems, the order of each prompt's numbers and the traces.
        """
        if not 3 <= min_numbers <= max_numbers <= 4:
            raise ValueError(f"need 3 <= min_numbers <= max_numbers <= 4, got {min_numbers}, {max_numbers}")
        if not 1 <= max_number <= 99 or not 1 <= max_target <= MAX_VALUE:
            raise ValueError(f"need max_number in [1, 99] and max_target in [1, {MAX_VALUE}], "
                             f"got {max_number}, {max_target}")
        if max_failed < 0 or not 0 <= wrong_rate <= 1 or max_rechecks < 0:
            raise ValueError(f"need max_failed >= 0, wrong_rate in [0, 1] and max_rechecks >= 0, got {max_failed}, "
                             f"{wrong_rate}, {max_rechecks}")
        self.min_numbers, self.max_numbers, self.max_number, self.max_target = (min_numbers, max_numbers,
                                                                                max_number, max_target)
        self.max_failed, self.wrong_rate, self.max_rechecks = max_failed, wrong_rate, max_rechecks
        self.num_val, self.seed = num_val, seed
        rng = random.Random(seed)
        problems, longest_attempt, longest_step = [], 0, 0
        for n in range(min_numbers, max_numbers + 1):
            for numbers in itertools.combinations_with_replacement(range(1, max_number + 1), n):
                reachable = solve(numbers)
                attempt_chars, step_chars = _longest_attempt_and_step(numbers)
                longest_attempt, longest_step = max(longest_attempt, attempt_chars), max(longest_step, step_chars)
                for target in sorted(t for t in reachable if 1 <= t <= max_target):
                    order = list(numbers)
                    rng.shuffle(order)
                    problems.append(Problem(tuple(order), target))
        rng.shuffle(problems)
        if num_val < 1 or len(problems) <= num_val:
            raise ValueError(f"countdown has {len(problems)} problems for these knobs; need num_val in "
                             f"[1, {len(problems) - 1}], got {num_val}")
        train = problems[num_val:] if num_train is None else problems[num_val:num_val + num_train]
        if len(train) < 1 or (num_train is not None and len(train) < num_train):
            raise ValueError(f"countdown has {len(problems)} problems; num_train + num_val = "
                             f"{(num_train or 0) + num_val} is more")
        self.num_train = len(train)
        self.val: list[Example] = [Example(p.text, p.text) for p in problems[:num_val]]
        self.train: list[Example] = [Example(p.text, p.text) for p in train]
        self._longest_attempt, self._longest_step = longest_attempt, longest_step
        self._trace_rng = random.Random(seed + 1)

    # ---- the PromptSet interface
    @property
    def config(self) -> dict[str, Any]:
        # max_rechecks came later: left out at 0, where the traces are those of before, so cached bases keep their key
        knobs = {k: getattr(self, k) for k in self.knobs if k != "max_rechecks" or self.max_rechecks}
        return {"name": self.name, **knobs, "num_train": self.num_train, "num_val": self.num_val, "seed": self.seed}

    @property
    def max_prompt_chars(self) -> int:  # tokens: numbers, commas, '>', target
        digits = len(str(self.max_number))
        return self.max_numbers * digits + self.max_numbers - 1 + 1 + len(str(self.max_target))

    @property
    def max_answer_chars(self) -> int:  # tokens of the longest trace
        attempts = self.max_failed + 1
        think = 2 + attempts * self._longest_attempt + attempts - 1  # tags, attempts, ';' between them
        think += self.max_rechecks * (1 + self._longest_step)  # ',' and the step again
        expression = self.max_numbers * len(str(self.max_number)) + self.max_numbers - 1 + 2 * (self.max_numbers - 2)
        return think + 2 + expression

    def target_ids(self, example: Example) -> list[int]:
        return self.tokenizer.encode(self.trace(example.answer, self._trace_rng)) + [self.tokenizer.eos_id]

    def collate_targets(self, examples: Sequence[Example]) -> tuple[torch.Tensor, torch.Tensor]:
        """Right-pads the traces to the batch's longest (not `max_answer_tokens`): traces vary from 18 to 59 tokens,
        and the SFT loss, masked, is the same while a batch costs about half the compute."""
        rows = [self.target_ids(e) for e in examples]
        return self._pad(rows, max(len(r) for r in rows), left=False)

    def val_core_metrics(self, texts: Sequence[str], scores: Sequence[Sequence[float]]) -> dict[str, float]:
        """verl's `val-core/countdown/reward/*`: `maj@N` votes on each answer's value (None without one)."""
        n = len(scores[0])
        votes = [prediction(text) for text in texts]
        return countdown_reward.val_core_metrics(self.val_core_source, scores,
                                                 [votes[i:i + n] for i in range(0, len(votes), n)])

    # ---- traces
    def trace(self, ground_truth: str, rng: random.Random) -> str:
        """One SFT demonstration for a problem (the module doc says how it is drawn)."""
        numbers, target = parse_ground_truth(ground_truth)
        live, dead = live_and_dead(tuple(sorted(numbers)), target)
        wrong = rng.random() < self.wrong_rate and dead
        failed = rng.randint(1, self.max_failed + 1) if wrong else rng.randint(0, self.max_failed)
        attempts = [shuffled(rng.choice(combine(*p)), rng) for p in rng.sample(dead, min(failed, len(dead)))]
        if not wrong:
            a, b = rng.choice(live)
            attempts.append(shuffled(rng.choice([n for n in combine(a, b) if n[3] == target]), rng))
        steps = [lines(tree, rng) for tree in attempts]
        checks = 0
        while wrong and checks < self.max_rechecks and rng.random() < 0.5:
            checks += 1
        steps[-1] += steps[-1][-1:] * checks
        think = ";".join(",".join(attempt) for attempt in steps)
        return f"<think>{think}</think><answer>{expression(attempts[-1])}</answer>"

    def solution_counts(self, examples: Sequence[Example]) -> list[int]:
        """Distinct correct equations of each problem (operand orders of + and * counted once)."""
        counts = []
        for ex in examples:
            numbers, target = parse_ground_truth(ex.answer)
            counts.append(len(solve(tuple(sorted(numbers)))[target]))
        return counts


@functools.lru_cache(maxsize=4096)
def live_and_dead(numbers: tuple[int, ...], target: int) -> tuple[list, list]:
    """The prefixes whose two values some last step turns into the target, and those none does."""
    live: list[tuple[Tree, Tree]] = []
    dead: list[tuple[Tree, Tree]] = []
    for a, b in prefixes(numbers):
        (live if any(node[3] == target for node in combine(a, b)) else dead).append((a, b))
    return live, dead


def _longest_attempt_and_step(numbers: tuple[int, ...]) -> tuple[int, int]:
    """Characters of the longest scratchpad attempt over these numbers (steps joined by ','), and of the longest
    step."""
    attempt, step = 0, 0
    for a, b in prefixes(numbers):
        for node in combine(a, b):
            steps = lines(node, random.Random(0))
            attempt, step = max(attempt, len(",".join(steps))), max(step, *map(len, steps))
    return attempt, step
