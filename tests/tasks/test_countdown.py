"""Countdown: TinyZero's reward on hand-written cases, the problems' split, the traces, verl's val-core names."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from playground.tasks.countdown_data import (
    CountdownPrompts,
    canonical,
    live_and_dead,
    solve,
    value_of,
)
from playground.tasks.countdown_reward import (
    _majority_values,
    evaluate,
    extract_answer,
    parse_ground_truth,
    prediction,
    score,
    val_core_metrics,
)
from playground.tasks.token_data import pass_at_k

GT = "3,7,8>53"  # 8*7-3


def s(text: str, format_score: float = 0.1) -> float:
    return score(text, GT, format_score=format_score)["score"]


# ---- TinyZero's rule on hand-written cases

def test_right_equation_scores_one_and_acc():
    assert score("<think>8*7=56,56-3=53</think><answer>(8*7)-3</answer>", GT) == {"score": 1.0, "acc": 1.0}
    assert s("<answer>7*8-3</answer>") == 1.0  # no scratchpad needed, any order, precedence as Python's


def test_no_answer_tag_scores_zero():
    assert s("<think>8*7=56,56-3=53</think>(8*7)-3") == 0.0
    assert s("<answer>(8*7)-3") == 0.0  # unclosed
    assert s("") == 0.0


def test_wrong_or_invalid_equations_score_the_format_score():
    assert s("<answer>8*7+3</answer>") == 0.1  # wrong value
    assert s("<answer>8*7-3-3</answer>") == 0.1  # a number reused
    assert s("<answer>8*7</answer>") == 0.1  # a number missing
    assert s("<answer>8*7-3+0</answer>") == 0.1  # a number not given
    assert s("<answer>56-3</answer>") == 0.1  # right value, other numbers
    assert s("<answer>(8*7-3</answer>") == 0.1  # does not parse
    assert s("<answer>8/(7-7)+3</answer>") == 0.1  # division by zero (and 7 reused)
    assert s("<answer></answer>") == 0.1  # TinyZero: an empty answer is still an answer (no numbers: invalid)
    assert s("<answer>8*7+3</answer>", format_score=0.0) == 0.0


def test_division_is_true_division_and_whitespace_is_stripped():
    assert score("<answer>8/4*3</answer>", "3,4,8>6")["score"] == 1.0
    assert score("<answer>(3+4)/8</answer>", "3,4,8>1")["score"] == 0.1  # 0.875: no integer division
    assert score("<answer> 8 * 7 - 3 </answer>", GT)["score"] == 1.0
    assert score("<answer>9/(1-2/3)</answer>", "1,2,3,9>27")["score"] == 1.0  # fractions inside (27.000000000000004)


def test_last_answer_counts():
    assert s("<answer>8*7+3</answer><answer>8*7-3</answer>") == 1.0
    assert s("<answer>8*7-3</answer><answer>8*7+3</answer>") == 0.1
    assert extract_answer("<answer>1</answer>x<answer> 2 </answer>") == "2"


def test_evaluate_refuses_what_is_not_arithmetic_and_huge_powers():
    assert evaluate("2**3") == 8.0 and evaluate("-3+5") == 2.0 and evaluate("7//2") == 3.0
    assert evaluate("9**9**9") is None and evaluate("abs(3)") is None and evaluate("3;4") is None
    assert prediction("<answer>8*7+3</answer>") == 59.0 and prediction("<think></think>") is None


def test_partial_credit_is_refused():
    with pytest.raises(ValueError, match="partial_credit"):
        score("<answer>8*7-3</answer>", GT, partial_credit=True)


def test_parse_ground_truth():
    assert parse_ground_truth("3,7,8>53") == ([3, 7, 8], 53)


# ---- tokenizer, solver, problems

def test_tags_are_single_tokens_and_round_trip():
    tok = CountdownPrompts.tokenizer
    text = "<think>8*7=56,56-3=53</think><answer>(8*7)-3</answer>"
    ids = tok.encode(text)
    assert len(ids) == 1 + 14 + 1 + 1 + 7 + 1 and tok.decode(ids) == text
    assert tok.vocab_size == 28


def test_solver_counts_distinct_equations():
    # 1, 2, 3 -> 6 by hand: three sums, (1*2)*3, (1*3)*2, (2*3)*1, (2*3)/1, (3/1)*2, (2/1)*3 (+ and * in any order
    # once; a different tree is a different equation)
    found = sorted(canonical(tree) for tree in solve((1, 2, 3))[6])
    assert found == sorted(["((1+2)+3)", "((1+3)+2)", "((2+3)+1)", "((1*2)*3)", "((1*3)*2)", "((2*3)*1)",
                            "((2*3)/1)", "((3/1)*2)", "((2/1)*3)"])
    assert 53 in solve((3, 7, 8)) and 52 not in solve((3, 7, 8))


def test_split_is_disjoint_seeded_and_covers_every_problem():
    data = CountdownPrompts(num_val=64, seed=3)
    key = lambda ex: (tuple(sorted(parse_ground_truth(ex.answer)[0])), parse_ground_truth(ex.answer)[1])  # noqa: E731
    train, val = {key(e) for e in data.train}, {key(e) for e in data.val}
    assert not train & val and len(val) == 64 and len(train) == len(data.train)
    again = CountdownPrompts(num_val=64, seed=3)
    assert [e.prompt for e in again.val] == [e.prompt for e in data.val]
    assert [e.prompt for e in CountdownPrompts(num_val=64, seed=4).val] != [e.prompt for e in data.val]
    assert all(len(solve(k[0]).get(k[1], [])) >= 1 for k in train | val)  # every problem is solvable


def test_traces_are_right_or_well_formed_wrong_and_fit_the_response():
    data = CountdownPrompts(num_val=16, wrong_rate=0.3)
    rng = random.Random(0)
    right = 0
    for ex in data.train[:200]:
        trace = data.trace(ex.answer, rng)
        result = data.score(trace, ex)
        assert result["score"] in (0.1, 1.0)
        right += result["acc"]
        assert len(data.tokenizer.encode(trace)) + 1 <= data.max_answer_tokens
    assert 0.6 < right / 200 < 0.85  # about 1 - 0.3 (a problem without dead prefixes always succeeds)


def test_rechecks_repeat_a_give_ups_last_step_and_change_only_its_length():
    # wrong_rate 1: every trace gives up where its problem has a dead prefix, so most of them may re-check
    plain = CountdownPrompts(num_val=16, wrong_rate=1.0)
    rechecked = CountdownPrompts(num_val=16, wrong_rate=1.0, max_rechecks=3)
    assert "max_rechecks" not in plain.config and rechecked.config["max_rechecks"] == 3  # old bases keep their key
    counts = []
    for i, ex in enumerate(rechecked.train[:400]):
        base, trace = plain.trace(ex.answer, random.Random(i)), rechecked.trace(ex.answer, random.Random(i))
        assert rechecked.score(trace, ex) == plain.score(base, ex)
        assert len(rechecked.tokenizer.encode(trace)) + 1 <= rechecked.max_answer_tokens
        if plain.score(base, ex) == 1.0:
            assert trace == base  # a trace that succeeds answers straight
            continue
        think, answer = base.split("</think>")
        last = think.split(",")[-1].split(";")[-1]
        counts.append(next(k for k in range(4) if trace == think + f",{last}" * k + "</think>" + answer))
    share = [counts.count(k) / len(counts) for k in range(4)]
    assert len(counts) > 200 and 0.4 < share[0] < 0.6 and 0.15 < share[1] < 0.35 and share[3] > 0.05  # 1/2 ... 1/8


def test_live_and_dead_prefixes():
    live, dead = live_and_dead((3, 7, 8), 53)
    assert [{value_of(x) for x in prefix} for prefix in live] == [{3, 56}]  # 7*8 then 56-3: the only way to 53
    assert len(dead) == 8  # 3 pairs x (+, *, -; no division is exact): 9 first steps


# ---- verl's validation metrics and pass@k

def test_pass_at_k_by_hand():
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 / 6)  # 1 - C(3,2)/C(4,2)
    assert pass_at_k(16, 2, 4) == pytest.approx(1 - (14 * 13 * 12 * 11) / (16 * 15 * 14 * 13))
    assert pass_at_k(16, 0, 16) == 0.0 and pass_at_k(16, 1, 16) == 1.0


def test_val_core_mean_best_and_majority():
    rewards = [[1.0, 0.1, 0.1, 0.0], [0.0, 0.0, 0.0, 0.0]]
    preds = [[53.0, 59.0, 59.0, None], [None, None, None, None]]
    out = val_core_metrics("countdown", rewards, preds)
    assert set(out) == {"val-core/countdown/reward/mean@4", "val-core/countdown/reward/best@4/mean",
                        "val-core/countdown/reward/maj@4/mean"}
    assert out["val-core/countdown/reward/mean@4"] == pytest.approx((1.2 / 4 + 0) / 2)
    # best of 4 draws with replacement: 1 unless no draw is response 0 ((3/4)^4), then 0.1 unless all are 3
    exact_best = 1 - 0.75**4 + 0.1 * (0.75**4 - 0.25**4)
    assert out["val-core/countdown/reward/best@4/mean"] == pytest.approx(exact_best / 2, abs=0.02)
    assert val_core_metrics("countdown", [[1.0]], [[1.0]]) == {"val-core/countdown/reward/mean@1": 1.0}


def test_majority_follows_verl_calc_maj_val():
    reward = np.array([1.0, 0.1, 0.1, 0.0])
    pred = [53.0, 59.0, 59.0, None]
    draws = np.array([[0, 1, 2, 3], [0, 3, 3, 1], [1, 0, 0, 3], [1, 0, 0, 1], [0, 1, 1, 0]])
    # 59 wins; None wins; 53 wins (reward of response 0); 59 and 53 tie, 59 seen first; tie, 53 seen first
    assert _majority_values(pred, reward, draws).tolist() == [0.1, 0.0, 1.0, 0.1, 1.0]


# ---- the config

@pytest.mark.parametrize("overrides, message", [
    (["reward.partial_credit=true"], "reward.partial_credit=True is out of range"),
    (["reward.name=exact_match"], "reward.name='exact_match' is out of range: allowed 'countdown'"),
])
def test_countdown_config_refuses_another_rule(overrides, message):
    from playground.config import ConfigError, compose
    from playground.tasks.prompt_sets import PromptSetKeys, check_config

    check_config(PromptSetKeys.from_config(compose(["task=countdown"])))
    with pytest.raises(ConfigError, match=message):
        check_config(PromptSetKeys.from_config(compose(["task=countdown", *overrides])))


@pytest.mark.parametrize(("key", "value", "got"), [("max_rechecks", -1, "got 2, 0.1, -1"),
                                                   ("wrong_rate", 2, "got 2, 2, 0"), ("max_numbers", 5, "got 3, 5")])
def test_knobs_out_of_range_are_a_config_error_naming_them(key, value, got):
    from playground.config import ConfigError, compose
    from playground.tasks.prompt_sets import prompts_for_task

    with pytest.raises(ConfigError, match=rf"task countdown's knobs are out of range \(.*task\.{key}.*\): .*{got}$"):
        prompts_for_task(compose(["task=countdown", f"task.{key}={value}"]).task)


# ---- a run end to end, on a tiny base (10 SFT steps of a 1-layer model: the plumbing, not the learning)

TINY_COUNTDOWN = ["task=countdown", "task.num_val=8", "actor_rollout_ref.model.n_layer=1",
                  "actor_rollout_ref.model.n_embd=32", "sft.eval_every=10", "sft.max_steps=10", "sft.target_acc_lo=0.0",
                  "data.train_batch_size=4", "actor_rollout_ref.actor.ppo_mini_batch_size=4",
                  "actor_rollout_ref.rollout.n=4", "actor_rollout_ref.rollout.val_kwargs.n=4",
                  "trainer.total_training_steps=1", "trainer.test_freq=1"]


def test_a_tiny_countdown_run_logs_pass_at_k_and_verls_val_core(train_run):
    from playground.metrics import is_known
    from playground.rundir.runs import read_metrics_jsonl

    _, run_dir = train_run(TINY_COUNTDOWN)
    records = read_metrics_jsonl(run_dir / "metrics.jsonl").records
    val = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[0])  # as written, before the readers'
    assert {"val/accuracy", "val/score", "val/pass@1", "val/pass@4", "val-core/countdown/reward/mean@4",
            "val-core/countdown/reward/best@4/mean", "val-core/countdown/reward/maj@4/mean"} <= set(val)
    # readers map verl's mean@N onto val/score (metrics.ALIAS_PATTERNS): the same number
    assert val["val-core/countdown/reward/mean@4"] == pytest.approx(val["val/score"])
    assert val["val/pass@1"] == pytest.approx(val["val/accuracy"])
    assert val["val-core/countdown/reward/best@4/mean"] >= val["val-core/countdown/reward/mean@4"]
    assert all(is_known(k) for r in records for k in r)
    step = records[1]
    assert step["response_length/max"] <= 64 and "critic/score/mean" in step
