"""Tests for playground.diagnose.readers_wandb: wandb's end-of-run block and its CSV exports, and their dispatch.

The `wandb_*.txt` fixtures are real public blocks; the CSV fixtures and the blocks written here are synthetic
(fixtures/SOURCES.md).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from playground.diagnose.readers import parse_verl_text, path_kind, read_any
from playground.diagnose.readers_wandb import (
    BLOCKS,
    parse_wandb_text,
    read_wandb_block,
    read_wandb_csv,
    sparkline_values,
)
from playground.metrics import STEP

FIXTURES = Path(__file__).parent / "fixtures"
LLAMA, QWEN, TOOL_N1 = (FIXTURES / "real" / n for n in (
    "llama32_1b_grpo_gsm8k_wandb.txt", "qwen25_7b_grpo_gsm8k_wandb.txt", "toolN1_issue9_zero_reward_wandb.txt"))
CAVEAT = "wandb's end-of-run sparklines, not the logged values"


def sparkify(values: list[float]) -> str:
    """wandb's own drawing (`wandb/sdk/lib/sparkline.py`), to check that a read line draws the same again."""
    finite = [v for v in values if math.isfinite(v)]
    low, span = min(finite), max(finite) - min(finite)
    if span == 0:
        return "".join(BLOCKS[0] if math.isfinite(v) else " " for v in values)
    return "".join(BLOCKS[int(round((v - low) * 7 / span))] if math.isfinite(v) else " " for v in values)


def series(read, metric: str) -> list[tuple[int, float]]:
    return [(int(r[STEP]), r[metric]) for r in read.records if metric in r]


def block(*rows: str, prefix: str = "wandb: ") -> str:
    return "\n".join(prefix + row for row in rows) + "\n"


# ---- the real blocks -------------------------------------------------------------------------------------------

# Sparklines copied from the fixtures: each read line must draw the same again, and end at the summary's value.
LLAMA_LINES = {
    "critic/score/mean": ("▁▃▄▅▆▆▆▇▆▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇███████████████", 0.89863),
    "actor/entropy": ("█▇▆▄▄▃▃▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁", 0.05091),
    "actor/kl_loss": ("▁▁▂▃▃▄▄▅▅▅▆▆▆▆▇▆▇▇▇▇▇▇▇▇▇▇▇█▇▇▇█████████", 0.00329),
    "actor/pg_loss": ("▄▆▇█▂▃▆▄▂▅▅▆▆▇▄▂▃▃▆▇▆▄▅▄▆▆▄▄▄▅▄▄▆▃▅▄▁▄▅▄", -0.00012),
    "val/score": ("▁▅▇▇█▇████████████████", 0.64291),
    "perf/max_memory_reserved_gb": ("▁▅██████████████████████████████████████", 52.69922),
}


@pytest.mark.parametrize("metric", sorted(LLAMA_LINES))
def test_real_block_lines_keep_their_shape_and_end_at_the_summary(metric):
    read = read_wandb_block(LLAMA)
    spark, last = LLAMA_LINES[metric]
    points = series(read, metric)
    assert sparkify([v for _, v in points]) == spark
    assert points[-1] == (105, pytest.approx(last))
    assert points[0][0] == 1 and [s for s, _ in points] == sorted({s for s, _ in points})


def test_real_block_trends_read_as_drawn():
    read = read_wandb_block(LLAMA)
    assert read.kind == "wandb_history" and read.skipped == {}
    score = [v for _, v in series(read, "critic/score/mean")]
    entropy = [v for _, v in series(read, "actor/entropy")]
    assert score[0] < score[10] < score[-1] and entropy[0] > entropy[10] > entropy[-1]
    assert entropy[0] == pytest.approx(8 * 0.05091)  # █ ending on ▁: a bar 8 times the last one
    assert all(v < 0 for _, v in series(read, "actor/pg_loss"))  # a negative last value keeps its sign
    assert len(series(read, "val/score")) == 22 and len(series(read, "timing_s/save_checkpoint")) == 6
    assert read.unscaled == ["actor/pg_clipfrac_lower"]  # drawn ▁▆▁…█▅▁, summary 0: no scale
    assert max(v for _, v in series(read, "actor/pg_clipfrac_lower")) == 1.0


def test_real_block_problems_say_what_is_coarse():
    read = read_wandb_block(QWEN)
    name = QWEN.name
    assert read.problems == [
        f"{name}: {CAVEAT}: 61 metrics drawn on 8 levels, up to 40 points each, read as bars scaled to the run "
        "summary's last values, over steps 1-105",
        f"{name}: the scale of `actor/pg_clipfrac_lower` is unknown (no finite, nonzero summary value to anchor the "
        "sparkline): their values are levels in [0, 1], for trends only",
        f"{name}: the run summary's 0.0 for `actor/lr` may be any value below 5e-06 (wandb rounds it to 5 decimals)",
    ]
    grad_norm = series(read, "actor/grad_norm")  # █▂▂▂▂▁▂▁…▁ falls, then stays at the last value
    assert grad_norm[0][1] > 5 * grad_norm[-1][1] and grad_norm[-1][1] == pytest.approx(0.07587)


def test_summary_only_block_is_one_exact_record():
    read = read_wandb_block(TOOL_N1)
    assert read.kind == "wandb_summary" and read.unscaled == [] and read.skipped == {}
    assert len(read.records) == 1
    assert read.records[0]["actor/entropy_loss"] == 0.1888 and read.records[0]["critic/score/mean"] == 0.0
    assert read.records[0][STEP] == 0.0
    assert any("no `_step` or training/global_step" in p for p in read.problems)


# ---- the block's variations ------------------------------------------------------------------------------------


def test_ray_prefixes_colour_codes_and_broken_rows_inside_a_block():
    ray, blue = "\x1b[36m(TaskRunner pid=67763)\x1b[0m ", "\x1b[34m\x1b[1mwandb\x1b[0m: "
    text = (
        "Training Progress: 100%|██████████| 9/9\n"
        f"{ray}{blue}\n{ray}{blue}\x1b[1mRun history:\x1b[0m\n"
        f"{ray}{blue}   critic/score/mean ▁▂▄▆█\n"
        f"{ray}{blue}       actor/entr\nopy █▆▄\n▂▁\n"  # broken in the key, then in the sparkline
        f"{ray}{blue}\n{ray}{blue}Run summary:\n"
        f"{ray}{blue}   critic/score/mean 0.8\n"
        f"{ray}{blue}       actor/entropy 0.0\n5\n"  # broken in the value: 0.05
        f"{ray}{blue}training/global_step 9\n"
        f"{ray}{blue}\n{ray}{blue}🚀 View run x at: https://wandb.ai/e/p/runs/x\n"
    )
    read = parse_wandb_text(text, name="pasted")
    assert read.skipped == {} and read.unscaled == []
    assert [p.split(": ", 1)[1][:len(CAVEAT)] for p in read.problems] == [CAVEAT]
    score, entropy = series(read, "critic/score/mean"), series(read, "actor/entropy")
    assert [s for s, _ in score] == [1, 3, 5, 7, 9] and sparkify([v for _, v in score]) == "▁▂▄▆█"
    assert score[-1][1] == 0.8 and score[0][1] == pytest.approx(0.1)
    assert sparkify([v for _, v in entropy]) == "█▆▄▂▁" and entropy[-1][1] == pytest.approx(0.05)


def test_history_without_summary_is_levels_with_no_scale():
    read = parse_wandb_text(block("Run history:", "  loss █▄▁", "score ▁▂▄▆█"))
    assert read.unscaled == ["loss", "score"]
    assert series(read, "score") == [(0, 0.0), (1, 1 / 7), (2, 3 / 7), (3, 5 / 7), (4, 1.0)]
    assert [s for s, _ in series(read, "loss")] == [0, 2, 4]  # spread over the longest line's positions
    assert "positions 0-4 (no `_step` or training/global_step in the summary)" in read.problems[0]
    assert "the scale of `loss`, `score` is unknown" in read.problems[1]


def test_old_wandb_step_blanks_and_a_non_finite_last_value():
    text = block("Run history:", "grad ▁▂ █", "loss ▃▂▁", "", "Run summary:", "_runtime 12", "_step 20",
                 "grad nan", "loss -2")
    read = parse_wandb_text(text)
    grad, loss = series(read, "grad"), series(read, "loss")
    assert [s for s, _ in loss] == [0, 10, 20] and [v for _, v in loss] == [-1.5, -1.75, -2.0]
    assert [s for s, _ in grad] == [0, 5, 10, 15, 20]  # the blank, and the NaN a paste cut from the line's end
    assert [v for _, v in grad][:2] == [0.0, 1 / 7] and all(math.isnan(v) for _, v in (grad[2], grad[4]))
    assert read.unscaled == ["grad"] and "_runtime" not in str(read.records)
    assert any("blank points in the sparklines of `grad`" in p for p in read.problems)


def test_rows_that_do_not_read_are_counted_and_other_runs_named():
    text = ("Run(first) history:\nscore ▁█\nnot a row here\n\nRun(first) summary:\nscore 1\nname qwen-7b...\n"
            "\nRun(second) history:\nscore █▁\n\nRun(second) summary:\nscore 0\n")
    read = parse_wandb_text(text, name="two.txt")
    assert series(read, "score") == [(0, 0.125), (1, 1.0)]
    assert read.skipped == {"not a `key sparkline` row": 1, "not a `key number` row": 1}
    assert "two.txt line 3: not a `key sparkline` row: 'not a row here', skipped" in read.problems
    assert "two.txt: also holds the wandb block of `second`: not read (one run a log)" in read.problems


def test_sparkline_values_read_bars_from_the_last_value():
    assert sparkline_values("▁█", 0.8) == ([0.1, 0.8], True)
    assert sparkline_values("█▁", -0.5) == ([-0.0625, -0.5], True)  # negative: zero one level above █
    assert sparkline_values("▁▁▁", 2.0) == ([2.0, 2.0, 2.0], True)  # wandb draws a constant as ▁
    assert sparkline_values("▁▁", 0.0) == ([0.0, 0.0], True)
    assert sparkline_values("█▁", 0.0) == ([1.0, 0.0], False)  # a 0 that is not flat: no scale
    assert sparkline_values("▁█", None) == ([0.0, 1.0], False)


def test_unreadable_text_is_one_clear_line():
    assert parse_wandb_text("just noise\nmore noise").problems == [
        "text: no wandb `Run history:` or `Run summary:` rows found"]
    read = parse_wandb_text("wandb: Run summary:\nwandb: \n", name="empty.txt")
    assert read.records == [] and read.problems == ["empty.txt: no wandb `Run history:` or `Run summary:` rows found"]
    with pytest.raises(FileNotFoundError, match="no log file at"):
        read_wandb_block(FIXTURES / "missing.txt")


# ---- CSV exports -----------------------------------------------------------------------------------------------


def test_panel_export_reads_the_first_run_and_names_the_others():
    read = read_wandb_csv(FIXTURES / "wandb_panel.csv")
    assert read.kind == "csv" and read.skipped == {}
    assert read.problems == ["wandb_panel.csv: holds 2 runs; read 'grpo-lr1e-6', not `grpo-lr1e-5`"]
    assert read.steps == [1, 2, 3, 4, 5]
    assert read.records[0] == {"critic/score/mean": 0.12, "actor/entropy": 0.62, STEP: 1.0}  # no __MIN/__MAX


def test_panel_export_reads_a_named_run_and_its_gaps():
    read = read_wandb_csv(FIXTURES / "wandb_panel.csv", run="grpo-lr1e-5")
    assert read.steps == [1, 2, 4, 5]  # step 3 has no value for this run
    assert read.records[-1] == {"critic/score/mean": 0.0, "actor/entropy": 0.01, STEP: 5.0}
    missing = read_wandb_csv(FIXTURES / "wandb_panel.csv", run="nope")
    assert missing.records == [] and missing.problems == [
        "wandb_panel.csv: no run named 'nope' (its runs: `grpo-lr1e-6`, `grpo-lr1e-5`)"]


def test_history_export_has_a_column_per_metric():
    read = read_wandb_csv(FIXTURES / "wandb_history.csv")
    assert read.problems == [] and read.steps == [0, 1, 2, 3, 4, 5]
    # the index, _runtime and _timestamp are not metrics; a source's score keeps its own name beside val/score
    assert read.records[0] == {"val/score": 0.31, "val-core/openai/gsm8k/reward/mean@1": 0.31, STEP: 0.0}
    assert math.isnan(read.records[4]["actor/pg_loss"])
    assert read.records[5] == {"actor/entropy": 0.45, "actor/pg_loss": -0.003, "critic/score/mean": 0.33,
                               "val/score": 0.42, "val-core/openai/gsm8k/reward/mean@1": 0.42, STEP: 5.0}


def test_csv_rows_that_do_not_read_are_counted(tmp_path):
    path = tmp_path / "export.csv"
    path.write_text("Step,loss,score\n1,0.5,0.1\n2,0.4\nx,0.3,0.2\n4,abc,0.3\n5,def,0.4\n\n6,0.2,0.5\n")
    read = read_wandb_csv(path)
    assert read.steps == [1, 4, 5, 6] and read.records[1] == {"score": 0.3, STEP: 4.0}
    assert read.skipped == {"wrong number of fields": 1, "no step": 1}
    assert read.problems == [
        "export.csv line 3: wrong number of fields (2, the header has 3), skipped",
        "export.csv line 4: no step ('x'), skipped",
        "export.csv line 5: `loss` is not a number ('abc'), skipped (and on 1 more line)",
    ]
    assert read.skipped_note() == "2 lines of export.csv skipped (1 wrong number of fields, 1 no step)"


def test_csv_without_steps_runs_table_and_junk(tmp_path):
    (tmp_path / "nostep.csv").write_text("loss,score\n0.5,0.1\n0.4,0.2\n")
    read = read_wandb_csv(tmp_path / "nostep.csv")
    assert read.steps == [0, 1] and read.problems[0].startswith("nostep.csv: no step column")
    (tmp_path / "runs.csv").write_text('"Name","State","Runtime","critic/score/mean"\n"a","finished",60,0.9\n')
    runs = read_wandb_csv(tmp_path / "runs.csv")
    assert runs.records == [] and len(runs.problems) == 1 and "a row per run" in runs.problems[0]
    (tmp_path / "empty.csv").write_text("")
    assert read_wandb_csv(tmp_path / "empty.csv").problems == ["empty.csv: empty"]
    (tmp_path / "blob.csv").write_text("Step,loss\n1,0.5\n2," + "x" * 200_000 + "\n3,0.4\n")
    blob = read_wandb_csv(tmp_path / "blob.csv")
    assert blob.steps == [1] and len(blob.problems) == 1 and "blob.csv line 3: not readable as CSV" in blob.problems[0]
    (tmp_path / "words.csv").write_text("Step,note\n1,hello\n")
    assert read_wandb_csv(tmp_path / "words.csv").problems == [
        "words.csv line 2: `note` is not a number ('hello'), skipped", "words.csv: no values in its rows"]


# ---- dispatch --------------------------------------------------------------------------------------------------


def test_path_kind_and_read_any_dispatch_wandb_files(tmp_path):
    assert path_kind(LLAMA) == path_kind(TOOL_N1) == "wandb_history"
    assert path_kind(FIXTURES / "wandb_panel.csv") == "csv"
    assert read_any(LLAMA).kind == "wandb_history" and read_any(TOOL_N1).kind == "wandb_summary"
    assert read_any(FIXTURES / "wandb_history.csv").kind == "csv"
    with_steps = tmp_path / "train.log"  # verl's step lines are exact: they win over the block at the end
    with_steps.write_text("step:1 - actor/pg_loss:0.5\n" + LLAMA.read_text(encoding="utf-8"), encoding="utf-8")
    assert path_kind(with_steps) == "console" and read_any(with_steps).steps == [1]


def test_pasted_wandb_block_is_recognised():
    read = parse_verl_text(TOOL_N1.read_text(encoding="utf-8"), name="paste")
    assert read.kind == "wandb_summary" and read.records[0]["critic/score/mean"] == 0.0
    assert parse_verl_text("step:2 - actor/pg_loss:0.5\nwandb: Run summary:\nwandb: x 1\n").kind == "verl_console"
