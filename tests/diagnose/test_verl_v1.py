"""verl v0.9's V1 key set (issue 25 item 1), read from a console log written for this test: the pre-update and the
in-update entropies stay two keys, `np.float64(...)` values read as numbers, and every V1 family has its glossary
entry; the zero-advantage share is computed as verl PR #5770 defines it."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from playground.algos.group_stats import zero_adv_ratio, zero_std_group_ratio
from playground.diagnose.engine import diagnose
from playground.diagnose.readers import read_verl_console_log
from playground.metric_names import ZERO_ADV_RATIO
from playground.metrics import STEP, canonical_name, glossary, glossary_entry

FIXTURES = Path(__file__).parent / "fixtures"


def test_v1_console_line_reads_every_key_with_numpy_values():
    read = read_verl_console_log(FIXTURES / "v1_names.log")
    assert read.problems == []
    (record,) = read.records
    assert record[STEP] == 1.0
    # two measurements: the pre-update entropy (every step) and the update's (only when computed)
    assert record["actor/entropy"] == 0.6125 and record["actor/entropy_loss"] == 0.6071
    assert record["actor/loss"] == -0.0015
    assert record["perf/max_memory_allocated_gb"] == 41.5 and record["perf/cpu_memory_used_gb"] == 88.25
    assert record["training/num_turns/max"] == 2.0
    assert record["timing_s/agent_loop/slowest/response_length"] == 1024.0
    assert record["val-core/openai/gsm8k/acc/maj@4/mean"] == 0.5


@pytest.mark.parametrize(("key", "entry"), [
    ("actor/entropy", "actor/entropy"),
    ("actor/entropy_loss", "actor/entropy_loss"),
    ("actor/perf/max_memory_reserved_gb", "perf/max_memory_reserved_gb"),
    ("num_turns/mean", "training/num_turns/mean"),  # the legacy trainer's name
    ("timing_s/agent_loop/num_preempted/max", "timing_s/agent_loop/*"),
    ("training/off_policy/trajectory_staleness_worst/mean", "training/off_policy/*"),
    ("validation/off_policy/evicted_samples", "training/off_policy/*"),
    ("training/filter_groups/discarded_surplus_samples", "training/filter_groups/*"),
    ("val-core/openai/gsm8k/acc/maj@8/mean", "val-core/<source>/<var>/<stat>@N"),
    ("val-aux/openai/gsm8k/acc/worst@8/mean", "val-aux/*"),
    ("val-core/openai/gsm8k/acc/mean@8", "val/accuracy"),
    ("frac_reward_zero_std", "train/zero_adv_group_ratio"),  # TRL
    ("grpo/frac_reward_zero_std", "train/zero_adv_group_ratio"),  # oumi's wrapper of verl
    (ZERO_ADV_RATIO, ZERO_ADV_RATIO),
])
def test_v1_names_have_their_glossary_entry(key, entry):
    assert glossary_entry(key) is glossary()[entry]


def test_entropy_entries_say_which_is_which():
    g = glossary()
    assert "pre-update" in g["actor/entropy"]["meaning"]["en"]
    assert "only when the update computes entropy" in g["actor/entropy_loss"]["verl_note"]["en"]
    assert "#7817" in g["response_length/clip_ratio"]["verl_note"]["en"]
    assert "before clipping" in g["actor/grad_norm"]["verl_note"]["en"]
    assert canonical_name("actor/entropy") == "actor/entropy"


def test_the_diagnosis_reads_the_pre_update_entropy_first():
    """A V1 log with both entropies: the rules judge actor/entropy; one with only the guide's name still reads."""
    steps = range(1, 13)
    both = [{STEP: float(s), "actor/entropy": 0.8 * 0.5 ** s, "actor/entropy_loss": 0.5,
             "critic/score/mean": 0.1} for s in steps]
    report = diagnose(both, family="llm", info={"score_target": 1.0})
    collapse = next(f for f in report.findings if f.id == "entropy_collapse")
    assert {e["metric"] for e in collapse.evidence} >= {"actor/entropy"}
    guide = [{STEP: float(s), "actor/entropy_loss": 0.8 * 0.5 ** s, "critic/score/mean": 0.1} for s in steps]
    assert "entropy_collapse" in diagnose(guide, family="llm", info={"score_target": 1.0}).ids()


def test_zero_adv_ratio_counts_responses_at_their_group_mean():
    # groups of 2: all right, mixed, all wrong, all right -> 6 of 8 responses get advantage 0
    scores, groups = [1, 1, 0, 1, 0, 0, 1, 1], [0, 0, 1, 1, 2, 2, 3, 3]
    assert zero_adv_ratio(scores, groups) == 0.75
    assert zero_std_group_ratio(scores, groups) == 0.75
    # a response at its group's mean gets 0 too (3 rewards 0, 0.5, 1): the share of responses, not of groups
    assert zero_adv_ratio([0.0, 0.5, 1.0], [7, 7, 7]) == pytest.approx(1 / 3)
    assert zero_std_group_ratio([0.0, 0.5, 1.0], [7, 7, 7]) == 0.0
    # verl gives a group of one mean 0: its response's advantage is its score
    assert zero_adv_ratio([0.0, 2.0], [0, 1]) == 0.5
    assert math.isnan(zero_adv_ratio([], []))
    with pytest.raises(ValueError):
        zero_adv_ratio([1.0, 2.0], [0])
