"""The calculator tool task: multi-digit multiplication, which the tiny GPT cannot do reliably in its head, with a
calculator it may call (the multi-turn interface of `rollout/turns.py`).

A prompt is "347*291=" after BOS. The policy may call the tool, `<tool>347*291</tool>`: that turn ends at `</tool>`
and the environment replies `<result>100977</result>` (`<result>?</result>` for what it cannot evaluate), out of the
loss. It answers `<answer>100977</answer>` then EOS. The answer is read from the final assistant turn: 1.0 when it is
the product, else 0 (`score` = `acc`, an exact match as the other arithmetic tasks); the episode counts its tool calls.

The SFT traces call the tool on a `tool_share` of them (the expression copied from the prompt, the result copied into
the answer) and answer "in the head" on the rest (the product written straight away), each trace drawn afresh, so the
base does both and RL can learn to rely on the tool or to drop it. The environment's reply in a trace is out of the
SFT loss too (verl's multi-turn SFT masks the tool's tokens): `collate_sft_targets`.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

import torch

from playground.rollout.turns import EnvReply
from playground.tasks.token_data import DIGITS, Example, NumberPrompts
from playground.tasks.tokenizer import Tokenizer

TAGS = ("<tool>", "</tool>", "<result>", "</result>", "<answer>", "</answer>")
_CALL = re.compile(r"<tool>([^<]*)</tool>$")  # the call that ends a turn
_EXPRESSION = re.compile(r"^\d{1,12}(\*\d{1,12})*$")  # what the calculator evaluates: a product of whole numbers
_ANSWER = re.compile(r"<answer>(\d*)</answer>")


def calculate(expression: str) -> str:
    """The calculator: the product of '*'-separated whole numbers (each up to 12 digits), or "?" for anything else."""
    if not _EXPRESSION.match(expression):
        return "?"
    value = 1
    for factor in expression.split("*"):
        value *= int(factor)
    return str(value)


def final_answer(text: str) -> str | None:
    """The last `<answer>N</answer>` of a turn's text (None without one)."""
    found = _ANSWER.findall(text)
    return found[-1] if found else None


class CalcEpisode:
    """One response's calculator: answers each call, counts them, scores the final turn's answer."""

    def __init__(self, answer: str):
        self.answer, self.tool_calls = answer, 0

    def step(self, assistant_turn: str) -> EnvReply:
        """A turn ends at `</tool>`: evaluate the call it ends with."""
        self.tool_calls += 1
        call = _CALL.search(assistant_turn)
        return EnvReply(f"<result>{calculate(call.group(1)) if call else '?'}</result>", 0.0, False)

    def outcome(self, last_turn: str) -> dict[str, float]:
        correct = float(final_answer(last_turn) == self.answer)
        return {"score": correct, "acc": correct, "tool_calls": float(self.tool_calls)}


class CalcPrompts(NumberPrompts):
    """Multiply two numbers of min_digits..max_digits digits (no leading zero); traces with and without the tool."""

    name = "calc"
    num_operands = 2
    knobs = ("min_digits", "max_digits", "tool_share")
    # digits, '*', '=', '?' (the calculator's "cannot evaluate") and the six tags as tokens: 3 + 13 + 6 = 22 ids
    tokenizer = Tokenizer(DIGITS + "*=?", words=TAGS)
    multi_turn = True
    turn_end_tokens = ("</tool>",)

    def __init__(self, min_digits: int = 3, max_digits: int = 3, tool_share: float = 0.5, **kwargs: Any):
        """`tool_share`: the share of SFT traces that call the tool (the rest answer in the head), in [0, 1]."""
        if not 0 <= tool_share <= 1:
            raise ValueError(f"need tool_share in [0, 1], got {tool_share}")
        self.tool_share = float(tool_share)
        super().__init__(min_digits, max_digits, **kwargs)
        self._trace_rng = random.Random(self.seed + 1)

    # ---- the PromptSet interface
    @property
    def config(self) -> dict[str, Any]:
        return {**super().config, "tool_share": self.tool_share}

    def make_example(self, operands: tuple[str, ...]) -> Example:
        a, b = operands
        return Example(prompt=f"{a}*{b}=", answer=str(int(a) * int(b)))

    @property
    def max_prompt_chars(self) -> int:
        return 2 * self.max_digits + 2

    @property
    def max_answer_chars(self) -> int:
        """Tokens of the longest trace: the call (2 tags, 2d + 1), the reply (2 tags, 2d), the answer (2 tags, 2d)."""
        return 6 * self.max_digits + 7

    # ---- traces
    def trace(self, example: Example, use_tool: bool) -> list[tuple[str, str]]:
        """One demonstration as (role, text) turns: "assistant" turns are trained on, the "env" reply is not."""
        answer = f"<answer>{example.answer}</answer>"
        if not use_tool:
            return [("assistant", answer)]
        expression = example.prompt.rstrip("=")
        return [("assistant", f"<tool>{expression}</tool>"), ("env", f"<result>{calculate(expression)}</result>"),
                ("assistant", answer)]

    def _trace_ids(self, example: Example) -> tuple[list[int], list[int]]:
        turns = self.trace(example, self._trace_rng.random() < self.tool_share)
        ids, trained = [], []
        for role, text in turns:
            part = self.tokenizer.encode(text)
            ids += part
            trained += [int(role == "assistant")] * len(part)
        return ids + [self.tokenizer.eos_id], trained + [1]

    def target_ids(self, example: Example) -> list[int]:
        return self._trace_ids(example)[0]

    def collate_sft_targets(self, examples: Sequence[Example]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Traces right-padded to the batch's longest: ids, attention mask, loss mask (0 on the tool's reply)."""
        rows = [self._trace_ids(e) for e in examples]
        width = max(len(ids) for ids, _ in rows)
        ids, attention = self._pad([r[0] for r in rows], width, left=False)
        loss = torch.tensor([r[1] + [0] * (width - len(r[1])) for r in rows], dtype=torch.long)
        return ids, attention, loss

    def new_episode(self, example: Example) -> CalcEpisode:
        return CalcEpisode(example.answer)
