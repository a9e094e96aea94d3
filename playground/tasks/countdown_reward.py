"""Countdown's rule reward, as TinyZero scores it (`verl/utils/reward_score/countdown.py`, `compute_score`).

The answer is the text inside the last `<answer>...</answer>`, stripped of whitespace. It scores
- 0 when there is no such answer,
- `format_score` (TinyZero's default 0.1) when the equation does not use each given number exactly once
  (the integers in it, sorted, must equal the numbers, sorted), or does not evaluate, or evaluates to another value,
- 1.0 when it uses every number once and `abs(value - target) < 1e-5`.

Differences from TinyZero, each because the playground has no chat template:
- TinyZero first keeps the text after "Assistant:" and then its last line; a response here is only the
  assistant's text and its vocabulary has no newline, so the whole response is searched.
- TinyZero evaluates with `eval` after a character allow-list (digits, `+-*/().`, whitespace); this evaluates the
  same grammar with `ast` (numbers, + - * / // ** and unary +/-), with `**` refused past an exponent of 64, so that
  an answer such as 9**9**9 scores as one that does not evaluate (TinyZero's eval would hang on it).

It also reports `acc` (1.0 exactly when the score is 1.0), the playground's `val/accuracy`; `prediction` is the
answer's value, on which verl's `maj@N` votes (`val_core_metrics`).
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from playground.metric_names import VAL_CORE

ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
ALLOWED = re.compile(r"^[\d+\-*/().\s]+$")  # TinyZero's allow-list
MAX_EXPONENT = 64
BOOTSTRAP_SEED, BOOTSTRAP_DRAWS = 42, 1000  # verl's bootstrap_metric defaults
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}


def parse_ground_truth(text: str) -> tuple[list[int], int]:
    """The numbers and target of a problem's text: "3,7,8>53" -> ([3, 7, 8], 53)."""
    numbers, target = text.split(">")
    return [int(n) for n in numbers.split(",")], int(target)


def extract_answer(response_text: str) -> str | None:
    """The stripped text of the last `<answer>...</answer>`, or None."""
    matches = ANSWER.findall(response_text)
    return matches[-1].strip() if matches else None


def uses_numbers_once(equation: str, numbers: list[int]) -> bool:
    """TinyZero's `validate_equation`: the integers written in the equation are exactly the given numbers."""
    return sorted(int(n) for n in re.findall(r"\d+", equation)) == sorted(numbers)


def evaluate(equation: str) -> float | None:
    """The equation's value, or None when it is not arithmetic over the allowed characters or fails (x/0)."""
    if not ALLOWED.match(equation):
        return None
    try:
        return float(_eval(ast.parse(equation, mode="eval").body))
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError, TypeError):
        return None


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value  # an int stays one: exact until the end
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ValueError("exponent too large")
        value = _BINARY[type(node.op)](left, right)
        if isinstance(value, complex):  # (-8)**0.5
            raise ValueError("complex value")
        return value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    raise ValueError(f"not arithmetic: {ast.dump(node)}")


def score(response_text: str, answer: str, *, format_score: float = 0.1,
          partial_credit: bool = False) -> dict[str, float]:
    """TinyZero's countdown score of one decoded response.

    Args:
        response_text: the decoded response (specials dropped, cut at EOS).
        answer: the prompt's ground truth, its numbers and target, "3,7,8>53" (`parse_ground_truth`); named as
            every prompt set's rule names it (`PromptSet.rule`).
        format_score: the score of a parsable answer that is not a correct equation.
        partial_credit: the token tasks' per-position credit; it has no meaning here and is refused.

    Returns:
        `{"score", "acc"}`.
    """
    if partial_credit:
        raise ValueError("reward.partial_credit=true is out of range for task countdown: allowed false")
    numbers, target = parse_ground_truth(answer)
    equation = extract_answer(response_text)
    if equation is None:
        return {"score": 0.0, "acc": 0.0}
    value = evaluate(equation)
    if not uses_numbers_once(equation, numbers) or value is None or abs(value - target) >= 1e-5:
        return {"score": float(format_score), "acc": 0.0}
    return {"score": 1.0, "acc": 1.0}


def prediction(response_text: str) -> float | None:
    """The value of the response's answer (None without an answer or a value): what verl's `maj@N` votes on."""
    equation = extract_answer(response_text)
    return None if equation is None else evaluate(equation)


def val_core_metrics(source: str, rewards: Sequence[Sequence[float]],
                     preds: Sequence[Sequence[float | None]]) -> dict[str, float]:
    """verl's `val-core/<source>/reward/*` (`metric_utils.process_validation_metrics`, then `ray_trainer`'s split
    into val-core and val-aux) for one data source whose reward function returns a bare score (TinyZero's countdown
    does: its core variable is then `reward`).

    Per prompt with N responses: `mean@N` is the mean reward; `best@N/mean` the mean over 1000 bootstrap draws of N
    responses *with replacement* of the best reward among them (so it is not pass@N, which draws without
    replacement); `maj@N/mean` the same draws' majority vote: the reward of the first response whose prediction is
    the most common (`calc_maj_val`). verl seeds numpy with 42 before each bootstrap, so every prompt and both
    statistics use the same draws; so does this. The keys are the means over prompts; verl's val-core holds only
    N = the responses per prompt.

    Args:
        source: the data source, verl's `data_source` ("countdown").
        rewards: `(prompts, N)` rewards.
        preds: `(prompts, N)` predictions to vote on (None is a vote too, as verl's "[INVALID]").
    """
    n = len(rewards[0])
    out = {f"{VAL_CORE}/{source}/reward/mean@{n}": float(np.mean([np.mean(r) for r in rewards]))}
    if n < 2:  # verl computes best/maj only for more than one response
        return out
    draws = np.random.RandomState(BOOTSTRAP_SEED).choice(n, size=(BOOTSTRAP_DRAWS, n), replace=True)
    best, majority = [], []
    for prompt_rewards, pred in zip(rewards, preds, strict=True):
        reward = np.asarray(prompt_rewards, dtype=np.float64)
        best.append(reward[draws].max(-1).mean())
        majority.append(_majority_values(pred, reward, draws).mean())
    out[f"{VAL_CORE}/{source}/reward/best@{n}/mean"] = float(np.mean(best))
    out[f"{VAL_CORE}/{source}/reward/maj@{n}/mean"] = float(np.mean(majority))
    return out


def _majority_values(pred: Sequence, reward: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """verl's `calc_maj_val` on each draw `(draws, N)` of response indices: the reward of the first response (in the
    draw's order) whose vote is the most common; among equally common votes the one seen first wins."""
    codes = {vote: i for i, vote in enumerate(dict.fromkeys(pred))}
    votes = np.array([codes[p] for p in pred])[draws]  # (draws, N)
    one_hot = votes[..., None] == np.arange(len(codes))  # (draws, N, votes)
    counts = one_hot.sum(1)  # (draws, votes)
    first = np.where(one_hot, np.arange(draws.shape[1])[:, None], draws.shape[1]).min(1)  # (draws, votes)
    winner = np.argmax(counts * (draws.shape[1] + 1) - first, axis=-1)  # most votes, then seen first
    position = first[np.arange(len(draws)), winner]
    return reward[draws[np.arange(len(draws)), position]]
