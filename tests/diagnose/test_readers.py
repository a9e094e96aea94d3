"""Tests for playground.diagnose.readers: verl console logs (fixtures hand-written), TensorBoard dirs, read_any."""

from __future__ import annotations

import io
import json
import math
import os
from pathlib import Path

import pytest

from playground.diagnose.readers import (
    parse_verl_text,
    read_any,
    read_tensorboard,
    read_verl_console_log,
)
from playground.metrics import STEP

FIXTURES = Path(__file__).parent / "fixtures"
NAN = "nan"  # NaN != NaN, so records are compared with NaN spelled as this string


def _comparable(records):
    return [{k: NAN if math.isnan(v) else v for k, v in r.items()} for r in records]


def _read(name):
    return read_verl_console_log(FIXTURES / name)


# ---- console logs, one test per variation -------------------------------------------------------------------


def test_plain_lines_with_noise_between():
    read = _read("plain_v04.log")
    assert read.kind == "verl_console" and read.problems == []
    assert read.steps == [1, 2, 3]
    assert read.records[1] == {
        "actor/entropy": 0.498, "actor/pg_loss": 0.003, "actor/pg_clipfrac": 0.004, "actor/ppo_kl": 0.001,
        "actor/grad_norm": 0.296, "critic/score/mean": 0.25, "response_length/mean": 228.25,
        STEP: 2.0, "training/epoch": 0.0,
    }


def test_ray_main_task_prefix_with_colour_codes_and_traceback():
    read = _read("ray_main_task.log")
    assert read.problems == []
    assert read.records == [
        {"actor/entropy": 0.512, "actor/pg_loss": -0.004, "actor/pg_clipfrac": 0.002, "critic/score/mean": 0.125,
         STEP: 1.0},
        {"actor/entropy": 0.498, "actor/pg_loss": 0.003, "actor/pg_clipfrac": 0.004, "critic/score/mean": 0.25,
         STEP: 2.0},
    ]


def test_ray_taskrunner_prefix_with_repeated_suffix_full_precision():
    read = _read("ray_taskrunner.log")
    assert read.problems == []
    assert read.steps == [1, 2, 3]
    assert read.records[0] == {
        "actor/entropy": 0.6931471805599453, "actor/pg_loss": -0.0012345678901234, "actor/ppo_kl": 1.2e-05,
        "actor/lr": 1e-06, "perf/mfu/actor": 0.31415926, STEP: 1.0, "training/epoch": 0.0,
    }
    assert read.records[1]["actor/ppo_kl"] == 2.5e-05 and read.records[1]["training/epoch"] == 0.0
    assert read.records[2]["actor/pg_loss"] == -0.0007


def test_full_precision_special_values_and_negatives():
    read = _read("full_precision.log")
    assert read.problems == []
    assert _comparable(read.records) == [{
        "actor/pg_loss": -0.0012345678901234, "actor/ppo_kl": 1.2e-05, "actor/grad_norm": NAN,
        "critic/score/max": math.inf, "critic/score/min": -math.inf, "critic/vf_loss": NAN,
        "response_length/max": 512.0, "critic/vf_explained_var": -0.234, "critic/vpred_mean": -2.056,
        "actor/pg_clipfrac": 0.0, "perf/max_memory_allocated_gb": 41.25, STEP: 1.0, "training/epoch": 0.0,
    }]


def test_validation_only_line_at_step_0():
    read = _read("val_step0.log")
    assert read.problems == []
    gsm8k = "val-core/openai/gsm8k/reward/mean@1"  # a data source's score: the guide's val/score, and its own name
    assert read.records == [
        {"val/score": 0.12, gsm8k: 0.12, STEP: 0.0},
        {"actor/entropy": 0.61, "critic/score/mean": 0.1, STEP: 1.0, "training/epoch": 0.0},
        {"actor/entropy": 0.6, "critic/score/mean": 0.15, "val/score": 0.2, gsm8k: 0.2, STEP: 2.0,
         "training/epoch": 0.0},
    ]


def test_wrapped_lines_are_rejoined_mid_key_mid_value_and_at_separators():
    read = _read("wrapped.log")
    assert read.problems == []
    assert read.records == [
        {"actor/pg_loss": -0.005, "actor/pg_clipfrac": 0.1, "actor/ppo_kl": 0.0012, "actor/grad_norm": 0.314,
         "critic/vf_loss": 0.25, "critic/vf_explained_var": -0.234, "critic/vpred_mean": -2.056,
         STEP: 1.0, "training/epoch": 0.0},  # `training/global_` + `step:1 - ...` is one key, not a new line
        {"actor/pg_loss": 0.002, "actor/pg_clipfrac": 0.05, "actor/ppo_kl": 0.002, "critic/vf_loss": 0.125,
         "critic/score/mean": 0.5, "critic/score/max": 1.0, "actor/lr": 1e-06, STEP: 2.0},
        {"actor/pg_loss": 0.001, "actor/entropy": 0.45, "critic/score/mean": 0.75, STEP: 3.0},
    ]


def test_noise_after_a_step_line_is_not_glued_onto_its_last_value():
    read = parse_verl_text("step:1 - actor/pg_loss:0.5\nDone\n  File \"x.py\", line 3\nkey: some words\n")
    assert read.records == [{"actor/pg_loss": 0.5, STEP: 1.0}] and read.problems == []


def test_excerpt_cut_at_both_ends_reports_the_fragments():
    read = _read("excerpt_cut.log")
    assert read.records == [
        {"actor/pg_loss": 0.01, "actor/pg_clipfrac": 0.12, "actor/ppo_kl": 0.004, STEP: 7.0},
        {"actor/pg_loss": 0.02, "actor/pg_clipfrac": 0.1, STEP: 8.0},
    ]
    assert len(read.problems) == 2
    assert read.problems[0].startswith("excerpt_cut.log line 1: metrics without the `step:N`")
    assert read.problems[1] == "excerpt_cut.log line 3 (step 8): `actor/grad_no` has no value (line cut off?), skipped"
    assert read.skipped == {"metrics without the `step:N` that starts their line": 1}


def test_excerpt_cut_after_a_key_reports_the_key():
    read = _read("excerpt_cut_key.log")
    assert read.records == [{"actor/pg_loss": 0.02, "actor/pg_clipfrac": 0.1, STEP: 8.0}]
    assert read.problems == [
        "excerpt_cut_key.log line 1 (step 8): `actor/ppo_kl` has no value (line cut off?), skipped"]


def test_excerpt_cut_in_a_value_keeps_a_value_that_parses():
    read = _read("excerpt_cut_value.log")
    assert read.problems == []
    assert read.records[-1] == {"actor/pg_loss": 0.03, "actor/pg_clipfrac": 0.11, "actor/ppo_kl": 0.0, STEP: 9.0}


def test_names_of_verl_03_and_07_map_to_the_same_record():
    """Every name of one quantity maps to the guide's; the entropy keeps its version's key: verl 0.3 logged the
    update's entropy (actor/entropy_loss), verl >= 0.4 the pre-update one (actor/entropy), two measurements."""
    common = {
        "actor/reward_kl_penalty": 0.001, "actor/reward_kl_penalty_coeff": 0.002,
        "perf/mfu/actor": 0.214, "actor/pg_loss": -0.003, "val/score": 0.35, "critic/vf_explained_var": -0.12,
        STEP: 1.0,
    }
    # verl >= 0.4's val-core/<source>/... keeps its source's name beside val/score (metrics.PER_SOURCE_SCORE)
    for name, entropy, source in (("names_v03.log", "actor/entropy_loss", {}),
                                  ("names_v07.log", "actor/entropy", {"val-core/openai/gsm8k/reward/mean@1": 0.35})):
        read = _read(name)
        assert read.problems == [] and read.records == [{entropy: 0.652, **common, **source}], name


def test_non_numeric_values_are_skipped_and_reported_once_per_key():
    read = _read("non_numeric.log")
    assert read.records == [
        {"actor/pg_loss": 0.1, "actor/is_warmup": 1.0, STEP: 1.0},
        {"actor/pg_loss": 0.2, STEP: 2.0},
        {"actor/pg_loss": 0.3, STEP: 3.0},
    ]
    assert read.problems == [
        "non_numeric.log line 1 (step 1): `actor/weird` is not a number (\"tensor(0.5000, device='cuda:0')\"), "
        "skipped (and on 2 more lines)",
        "non_numeric.log line 1 (step 1): `actor/hist` is not a number ('[1, 2]'), skipped (and on 1 more line)",
        "non_numeric.log line 1 (step 1): `actor/name` is not a number (\"'fsdp'\"), skipped",
    ]


def test_keys_with_special_characters_and_scaled_units():
    read = parse_verl_text(
        "step:4 - val-aux/openai/gsm8k.v2/acc/best@4/mean:0.5 - perf/mfu/actor_infer:0.1 - actor/lr(1e-6):2.5"
        " - critic/vf_explained_var:-0.234 - critic/vpred_mean:-2.056 - timing_s/agent_loop/tool_calls/max:-1")
    assert read.problems == []
    assert read.records == [{
        "val/pass@4": 0.5, "perf/mfu/actor_infer": 0.1, "actor/lr": 2.5 * 1e-6, "critic/vf_explained_var": -0.234,
        "critic/vpred_mean": -2.056, "timing_s/agent_loop/tool_calls/max": -1.0, STEP: 4.0,
    }]


def test_tqdm_carriage_return_on_the_same_line():
    read = parse_verl_text("Training:  10%|#  | 1/10\rstep:1 - actor/pg_loss:0.5\n"
                           "\rTraining:  20%|## | 2/10 [00:10<00:40]step:2 - actor/pg_loss:0.25\n")
    assert read.records == [{"actor/pg_loss": 0.5, STEP: 1.0}, {"actor/pg_loss": 0.25, STEP: 2.0}]


def test_same_step_merged_later_keys_win_sorted_by_step():
    read = parse_verl_text("step:2 - actor/pg_loss:1 - actor/ppo_kl:2\nstep:1 - actor/pg_loss:0.5\n"
                           "step:2 - actor/ppo_kl:3 - actor/grad_norm:4\n")
    assert read.records == [
        {"actor/pg_loss": 0.5, STEP: 1.0},
        {"actor/pg_loss": 1.0, "actor/ppo_kl": 3.0, "actor/grad_norm": 4.0, STEP: 2.0},
    ]


def test_comments_are_not_part_of_values():
    read = parse_verl_text("step:3 - actor/pg_loss:0.5  # too high\n# a note\n       - actor/ppo_kl:0.1 # note\n")
    assert read.problems == [] and read.records == [{"actor/pg_loss": 0.5, "actor/ppo_kl": 0.1, STEP: 3.0}]


def test_junk_is_reported_not_raised():
    read = _read("junk.log")
    assert read.records == []
    assert read.problems == ["junk.log: no verl step lines (`step:N - key:value - ...`) found"]
    assert parse_verl_text("").problems == ["text: no verl step lines (`step:N - key:value - ...`) found"]


def test_text_stream_and_missing_path():
    read = read_verl_console_log(io.StringIO("step:1 - actor/pg_loss:0.5\n"), name="pasted")
    assert read.records == [{"actor/pg_loss": 0.5, STEP: 1.0}] and read.source == "pasted"
    with pytest.raises(FileNotFoundError, match="no log file at"):
        read_verl_console_log(FIXTURES / "missing.log")


# ---- the metrics guide's own examples ------------------------------------------------------------------------

GUIDE = {
    "guide_s1_3_scenario1.log": [
        {"actor/ppo_kl": 0.003, "actor/pg_clipfrac": 0.15, STEP: 0.0},
        {"actor/ppo_kl": 0.004, "actor/pg_clipfrac": 0.20, STEP: 10.0},
        {"actor/ppo_kl": 0.002, "actor/pg_clipfrac": 0.10, STEP: 20.0},
    ],
    "guide_s1_3_scenario2.log": [
        {"actor/ppo_kl": 0.050, "actor/pg_clipfrac": 0.80, STEP: 0.0},
        {"actor/ppo_kl": 0.045, "actor/pg_clipfrac": 0.75, STEP: 1.0},
    ],
    "guide_s1_3_scenario3.log": [
        {"actor/ppo_kl": 0.0001, "actor/pg_clipfrac": 0.01, STEP: 80.0},
        {"actor/ppo_kl": 0.0001, "actor/pg_clipfrac": 0.01, STEP: 90.0},
    ],
    "guide_11_4_example1.log": [{
        "timing_s/gen": 21.47, "timing_s/ref": 4.36, "timing_s/values": 5.8, "actor/reward_kl_penalty": 0.0,
        "actor/reward_kl_penalty_coeff": 0.001, "timing_s/adv": 0.109, "timing_s/update_critic": 15.664,
        "critic/vf_loss": 14.947, "critic/vf_clipfrac": 0.0, "critic/vpred_mean": -2.056, "critic/grad_norm": 1023.278,
        "critic/lr": 0.1 * 1e-4, "timing_s/update_actor": 20.314, "actor/entropy_loss": 0.433, "actor/pg_loss": -0.005,
        "actor/pg_clipfrac": 0.0, "actor/ppo_kl": 0.0, "actor/grad_norm": 1.992, "actor/lr": 0.01 * 1e-6,
        "critic/score/mean": 0.004, "critic/score/max": 1.0, "critic/score/min": 0.0, "response_length/mean": 239.133,
        "response_length/max": 256.0, STEP: 0.0,
    }],
    "guide_11_4_example2.log": [{
        "actor/pg_loss": 0.523, "actor/pg_clipfrac": 0.85, "actor/ppo_kl": 0.125, "actor/grad_norm": 1.0,
        "critic/score/mean": 0.003, STEP: 5.0,
    }],
    "guide_11_4_example3.log": [{
        "critic/vf_loss": 45.23, "critic/vf_explained_var": -0.234, "critic/vpred_mean": 0.123,
        "critic/returns/mean": 5.678, "actor/pg_loss": -0.002, "critic/score/mean": 0.256, STEP: 50.0,
    }],
}


@pytest.mark.parametrize("name", sorted(GUIDE))
def test_guide_examples_parse_exactly(name):
    read = _read(name)
    assert read.problems == []
    assert read.records == GUIDE[name]


# ---- TensorBoard ---------------------------------------------------------------------------------------------


def _write_events(logdir: Path, scalars: dict[str, list[tuple[int, float]]]) -> None:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(logdir))
    for tag, points in scalars.items():
        for step, value in points:
            writer.add_scalar(tag, value, step)
    writer.close()


@pytest.fixture(scope="module")
def verl_tb(tmp_path_factory) -> Path:
    """verl's layout: tensorboard_log/<project>/<experiment>/events.out.tfevents.*"""
    root = tmp_path_factory.mktemp("tb") / "tensorboard_log"
    _write_events(root / "gsm8k" / "ppo_run1", {
        "actor/pg_loss": [(1, 0.5), (2, math.nan), (3, -0.25)],
        "actor/entropy": [(1, 0.75), (2, 0.5), (3, 0.25)],  # verl >= 0.4: the pre-update entropy, its own key
        "timing/gen": [(1, 2.0)],
        "val-core/openai/gsm8k/reward/mean@1": [(0, 0.125), (3, 0.5)],
    })
    return root


def test_tensorboard_verl_layout_with_nan_and_alias(verl_tb):
    read = read_tensorboard(verl_tb)
    assert read.kind == "tensorboard" and read.problems == []
    gsm8k = "val-core/openai/gsm8k/reward/mean@1"
    assert _comparable(read.records) == [
        {"val/score": 0.125, gsm8k: 0.125, STEP: 0.0},
        {"actor/pg_loss": 0.5, "actor/entropy": 0.75, "timing_s/gen": 2.0, STEP: 1.0},
        {"actor/pg_loss": NAN, "actor/entropy": 0.5, STEP: 2.0},
        {"actor/pg_loss": -0.25, "actor/entropy": 0.25, "val/score": 0.5, gsm8k: 0.5, STEP: 3.0},
    ]
    assert _comparable(read_tensorboard(verl_tb / "gsm8k" / "ppo_run1").records) == _comparable(read.records)
    event_file = next((verl_tb / "gsm8k" / "ppo_run1").glob("events.out.tfevents.*"))
    assert read_any(event_file).steps == [0, 1, 2, 3]


def test_tensorboard_runs_with_different_tags_merge_by_step(tmp_path):
    _write_events(tmp_path / "a", {"actor/pg_loss": [(1, 0.5), (2, 0.25)]})
    _write_events(tmp_path / "b", {"critic/vf_loss": [(2, 4.0)]})
    read = read_tensorboard(tmp_path)
    assert read.problems == []
    assert read.records == [
        {"actor/pg_loss": 0.5, STEP: 1.0}, {"actor/pg_loss": 0.25, "critic/vf_loss": 4.0, STEP: 2.0}]


def test_tensorboard_runs_with_the_same_tags_read_the_newest(tmp_path):
    _write_events(tmp_path / "proj" / "old", {"actor/pg_loss": [(1, 0.5)]})
    _write_events(tmp_path / "proj" / "new", {"actor/pg_loss": [(1, 0.125)]})
    for run, mtime in (("old", 1_000_000), ("new", 2_000_000)):
        for f in (tmp_path / "proj" / run).iterdir():
            os.utime(f, (mtime, mtime))
    read = read_tensorboard(tmp_path)
    assert read.records == [{"actor/pg_loss": 0.125, STEP: 1.0}]
    assert len(read.problems) == 1 and "read the newest, proj/new, not proj/old" in read.problems[0]


def test_tensorboard_tf2_tensor_scalars(tmp_path):
    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, types_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(tmp_path))
    meta = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
    for step, value in ((1, 0.5), (2, 0.25)):
        tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, float_val=[value])
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="mfu/actor", metadata=meta, tensor=tensor)])
        writer.add_event(event_pb2.Event(step=step, wall_time=1.0, summary=summary))
    writer.close()
    assert read_tensorboard(tmp_path).records == [
        {"perf/mfu/actor": 0.5, STEP: 1.0}, {"perf/mfu/actor": 0.25, STEP: 2.0}]


def test_tensorboard_corrupt_file_and_empty_dir_are_problems(tmp_path):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "events.out.tfevents.1.host").write_bytes(b"\x00\x01 not a record" * 10)
    read = read_tensorboard(tmp_path / "bad")
    assert read.records == [] and len(read.problems) == 1
    (tmp_path / "none").mkdir()
    none = read_tensorboard(tmp_path / "none")
    assert none.records == [] and none.problems[0].endswith("no TensorBoard event files (events.out.tfevents.*) found")
    with pytest.raises(FileNotFoundError):
        read_tensorboard(tmp_path / "missing")


# ---- read_any dispatch ---------------------------------------------------------------------------------------


def test_read_any_run_dir_reads_metrics_jsonl(tmp_path):
    lines = [{STEP: 1, "actor/pg_loss": 0.5}, {STEP: 2, "actor/pg_loss": "NaN", "actor/entropy": 0.25}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    read = read_any(tmp_path)
    assert read.kind == "jsonl" and read.problems == []
    assert _comparable(read.records) == [
        {STEP: 1.0, "actor/pg_loss": 0.5}, {STEP: 2.0, "actor/pg_loss": NAN, "actor/entropy": 0.25}]


def test_read_any_jsonl_file_with_half_written_last_line(tmp_path):
    path = tmp_path / "exp.jsonl"  # verl's file logger
    path.write_text('{"step": 1, "data": {"actor/pg_loss": 0.5}}\n{"step": 2, "data": {"actor/pg_lo')
    read = read_any(path)
    assert read.kind == "jsonl" and read.problems == []
    assert read.records == [{"actor/pg_loss": 0.5, STEP: 1.0}]


def test_read_any_tensorboard_dir(verl_tb):
    read = read_any(verl_tb.parent)
    assert read.kind == "tensorboard" and read.steps == [0, 1, 2, 3]


def test_read_any_console_log_and_junk(tmp_path):
    read = read_any(FIXTURES / "guide_11_4_example2.log")
    assert read.kind == "verl_console" and read.records == GUIDE["guide_11_4_example2.log"]
    binary = tmp_path / "core.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    assert read_any(binary).records == [] and len(read_any(binary).problems) == 1
    (tmp_path / "empty").mkdir()
    read = read_any(tmp_path / "empty")
    assert read.records == [] and "no metrics.jsonl" in read.problems[0]
    with pytest.raises(FileNotFoundError, match="nothing at"):
        read_any(tmp_path / "missing")


# ---- skipped lines: counted by why, one problem line per why ---------------------------------------------------


def test_corrupt_metrics_jsonl_lines_are_counted_and_folded(tmp_path):
    good = [json.dumps({STEP: s, "actor/pg_loss": 0.1 * s}) for s in range(1, 4)]
    lines = [good[0], "garbage", good[1], "{half", "[1, 2]", json.dumps({"actor/pg_loss": 1}), "nope", good[2]]
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    read = read_any(tmp_path)
    assert read.steps == [1, 2, 3]
    assert read.skipped == {"not valid JSON": 3, "not a JSON object": 1, f"no {STEP}": 1}
    assert read.problems == [
        "metrics.jsonl line 2: not valid JSON, skipped (and on 2 more lines)",
        "metrics.jsonl line 5: not a JSON object, skipped",
        f"metrics.jsonl line 6: no {STEP}, skipped",
    ]
    assert read.skipped_note() == (f"5 lines of metrics.jsonl skipped (3 not valid JSON, 1 not a JSON object, "
                                   f"1 no {STEP})")


def test_one_kind_of_skip_names_its_why_and_a_clean_read_has_no_note(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join([json.dumps({STEP: 1})] + ["x"] * 3) + "\n")
    assert read_any(path).skipped_note() == "3 lines of m.jsonl skipped (not valid JSON)"
    assert _read("plain_v04.log").skipped == {} and _read("plain_v04.log").skipped_note() is None


def test_console_fragments_are_counted_in_one_problem_line():
    fragment = "actor/pg_clipfrac:0.1 - actor/ppo_kl:0.003"
    read = parse_verl_text("\n".join([fragment, "step:1 - actor/pg_loss:0.5", "", fragment, "", fragment]))
    assert read.records == [{"actor/pg_loss": 0.5, STEP: 1.0}]
    assert read.skipped == {"metrics without the `step:N` that starts their line": 3}
    assert len(read.problems) == 1 and read.problems[0].startswith("line 1: metrics without the `step:N`")
    assert read.problems[0].endswith("skipped (and on 2 more lines)")
