"""Issue 51 item 3: per data source findings. verl logs each source's validation as
`val-core/<data_source>/<var>/mean@N`; where one source falls from its peak while another rises, the report names the
falling source (`source_regression`) with both series as evidence. Logs written for the test."""

from __future__ import annotations

import json
from pathlib import Path

from playground.diagnose.readers import parse_verl_text
from playground.diagnose.report import format_markdown
from playground.diagnose.sources import diagnose_path, diagnose_read
from playground.metric_names import VAL_SCORE
from playground.metrics import canonicalize

from .test_issue25_rules import console, steps

GSM8K, MATH = "val-core/openai/gsm8k/reward/mean@1", "val-core/lighteval/MATH/acc/mean@4"
RISING = {s: 0.30 + 0.004 * s for s in range(10, 101, 10)}  # 0.34 -> 0.70
# peaks at 0.52 (step 40), then 0.46, 0.42, 0.40, ...: its last two evaluations 0.2+ of the peak below it
FALLING = {10: 0.40, 20: 0.46, 30: 0.50, 40: 0.52, 50: 0.46, 60: 0.44, 70: 0.42, 80: 0.41, 90: 0.40, 100: 0.39}


def _log(gsm8k: dict[int, float], math: dict[int, float]) -> str:
    return console(steps(100, **{GSM8K: gsm8k.get, MATH: math.get}))


def test_a_source_that_falls_while_another_rises_is_named_with_both_series():
    report = diagnose_read(parse_verl_text(_log(RISING, FALLING), name="test.log"))
    found = next(f for f in report.findings if f.id == "source_regression")
    assert found.severity == "warning" and found.rule == "source_regression"
    fell, rose = found.evidence[0], found.evidence[1]
    assert fell["metric"] == MATH and fell["status"] == "bad" and fell["value"] == 0.39
    assert "peaked at 0.52 (step 40)" in fell["range"] and "0.4, 0.46, 0.5, 0.52, 0.46" in fell["range"]
    assert rose["metric"] == GSM8K and rose["status"] == "ok" and rose["step"] == 100
    assert found.first_step >= 60  # judged on the run so far: it holds once two evaluations sit below the line
    # the report says it, naming the source
    assert "lighteval/MATH" in format_markdown("test.log", report, "en")
    assert "某个数据源退步" in format_markdown("test.log", report, "zh")


def test_near_miss_both_sources_rising_or_only_one_source_says_nothing():
    rising_more = {s: v + 0.05 for s, v in RISING.items()}
    assert "source_regression" not in diagnose_read(parse_verl_text(_log(RISING, rising_more))).ids()
    # one source alone: its fall is the held-out score's (reward_hacking_heldout), not a difference between sources
    one = console(steps(100, **{MATH: FALLING.get}))
    assert "source_regression" not in diagnose_read(parse_verl_text(one)).ids()


def test_both_sources_falling_is_no_difference_between_them():
    lower = {s: v - 0.1 for s, v in FALLING.items()}
    assert "source_regression" not in diagnose_read(parse_verl_text(_log(lower, FALLING))).ids()


def test_a_verl_file_logger_jsonl_keeps_each_sources_score(tmp_path):
    path = tmp_path / "metrics.jsonl"
    with open(path, "w") as f:
        for record in steps(100, **{GSM8K: RISING.get, MATH: FALLING.get}):
            step = int(record.pop("training/global_step"))
            f.write(json.dumps({"step": step, "data": {k: v for k, v in record.items() if v is not None}}) + "\n")
    [(_, report)] = diagnose_path(path)
    assert "source_regression" in report.ids()


def test_canonical_names_keep_each_source_beside_the_guides_one_score():
    record = canonicalize({GSM8K: 0.5, MATH: 0.25, "val-core/openai/gsm8k/reward/std@1": 0.1})
    assert record[VAL_SCORE] == 0.5 and record[GSM8K] == 0.5 and record[MATH] == 0.25
    assert record["val-core/openai/gsm8k/reward/std@1"] == 0.1  # no alias: it kept its name before


def test_the_fixture_docs_diagnose_is_this_tests_log():
    """docs/diagnose.md diagnoses tests/diagnose/fixtures/two_sources_one_falls.log: the log this file writes."""
    fixture = Path(__file__).parent / "fixtures" / "two_sources_one_falls.log"
    assert fixture.read_text(encoding="utf-8") == _log(RISING, FALLING)
