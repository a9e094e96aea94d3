"""Tests for the base's figures: greedy and sampled accuracy, token entropy, pass@k on val."""

from __future__ import annotations

import math

import pytest
import torch

from playground.base_figures import base_figures
from playground.models.tiny_gpt import GPTConfig, TinyGPT
from playground.tasks.prompt_sets import make_prompts
from playground.tasks.sft import greedy_accuracy
from playground.tasks.token_data import pass_at_k

MODEL = GPTConfig(vocab_size=17, block_size=16, n_layer=1, n_embd=32)


@pytest.fixture(scope="module")
def task():
    return make_prompts("reverse", min_digits=3, max_digits=3, num_val=16)


def test_a_uniform_model_has_the_vocabularys_entropy(task):
    """Zero hidden states give zero logits: every token's sampling entropy is log(V), whatever was sampled."""
    torch.manual_seed(0)
    model = TinyGPT(MODEL)
    with torch.no_grad():
        model.transformer.ln_f.weight.zero_()
        model.transformer.ln_f.bias.zero_()
    figures = base_figures(model, task, n=4, ks=(1, 4))
    assert figures["token_entropy"] == pytest.approx(math.log(17), abs=1e-5)
    assert 1 <= figures["response_length"] <= task.max_answer_tokens


def test_pass_at_k_and_accuracy_agree_with_the_samples(task, monkeypatch):
    """pass@1 is the sampled accuracy; pass@k the unbiased estimator over each prompt's correct count."""
    torch.manual_seed(0)
    model = TinyGPT(MODEL)
    calls = []
    score = task.score

    def counting_score(text, example, **kwargs):
        calls.append((example.prompt, score(text, example, **kwargs)["acc"]))
        return score(text, example, **kwargs)

    monkeypatch.setattr(task, "score", counting_score)
    figures = base_figures(model, task, n=4, ks=(1, 2, 4), seed=3)
    sampled = calls[:len(task.val) * 4]  # the greedy pass scores after the samples
    correct = [sum(acc for _, acc in sampled[i:i + 4]) for i in range(0, len(sampled), 4)]
    assert figures["sampled_accuracy"] == figures["pass@1"] == pytest.approx(sum(correct) / len(sampled))
    assert figures["pass@2"] == pytest.approx(sum(pass_at_k(4, int(c), 2) for c in correct) / len(correct))
    monkeypatch.undo()
    assert figures["greedy_accuracy"] == greedy_accuracy(model, task, task.val)
    assert base_figures(model, task, n=4, ks=(1, 2, 4), seed=3) == figures  # seeded
    assert model.training  # left in the mode it came in


def test_k_outside_the_samples_is_refused(task):
    with pytest.raises(ValueError, match="every k in 1..n=4"):
        base_figures(TinyGPT(MODEL), task, n=4, ks=(1, 16))
