"""`make gpu-check` runs where no GPU is: it says so and exits 0, and its token batches' code path runs on a CPU."""

from __future__ import annotations

import json
import sys

import pytest
import torch


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here: the check would run in full")
def test_without_a_gpu_the_check_says_so_and_returns(monkeypatch, capsys):
    from benchmarks.gpu_check import main

    monkeypatch.setattr(sys, "argv", ["gpu_check"])
    main()  # `python -m benchmarks.gpu_check` exits 0 after it
    assert capsys.readouterr().out.strip() == "no CUDA device: nothing to check"


def test_token_batches_run_on_a_cpu_with_a_tiny_k(capsys):
    from benchmarks.gpu_check import token_batches

    token_batches("cpu", (1, 2), steps=2, extra=("+debug=tiny",))
    figures = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [f["figure"] for f in figures] == ["gpu_reverse_K1_train_tokens_per_s", "gpu_reverse_K2_train_tokens_per_s"]
    assert figures[0]["ratio_to_K1"] == 1.0 and all(f["value"] > 0 and f["gen_tokens_per_s"] > 0 for f in figures)


def test_rollout_precision_probes_run_on_a_cpu(capsys):
    """The bf16 and fp16 rollouts' probs diff against an fp32 trainer (on a CPU a rounding fact): inside verl's
    normal range on the tiny GPT, as shared/reference/mismatch-probe.md measured, and not zero."""
    from benchmarks.gpu_check import rollout_precision

    probes = rollout_precision("cpu", prompts=16)
    figures = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [f["figure"] for f in figures] == ["gpu_rollout_bfloat16_probs_diff_mean",
                                              "gpu_rollout_float16_probs_diff_mean"]
    for name in ("bfloat16", "float16"):
        assert 0 < probes[name]["rollout_probs_diff_mean"] < 0.005
    assert probes["float16"]["rollout_probs_diff_mean"] < probes["bfloat16"]["rollout_probs_diff_mean"]
