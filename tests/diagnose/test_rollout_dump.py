"""verl's rollout dumps (issue 51, `trainer.rollout_data_dir`): the reader, the text checks with the samples behind
each finding, and `python -m playground.diagnose LOG --rollout-dir DIR`. Every dump here is written by the test."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from playground.diagnose import __main__ as cli
from playground.diagnose.engine import Report
from playground.diagnose.finding import Finding
from playground.diagnose.report import SCHEMA_PATH
from playground.diagnose.rollout_dump import is_dump_dir, read_dump
from playground.diagnose.rollout_text import add_to_report, dump_findings, format_without_answer, looping_tail

FIXTURE = Path(__file__).parent / "fixtures" / "rollout_dump"
GOOD = "<think>7*3 is 21, plus 1.</think> <answer>7*3+1</answer>"


def write_dump(folder: Path, steps: dict[int, list[tuple[str, str, float]]], **extra) -> Path:
    """A dump as verl's `_write_generations` writes it: {step}.jsonl, one (input, output, score) a line."""
    folder.mkdir(parents=True, exist_ok=True)
    for step, samples in steps.items():
        (folder / f"{step}.jsonl").write_text("".join(json.dumps(
            {"input": prompt, "output": output, "gts": "22", "score": score, "step": step, **extra}) + "\n"
            for prompt, output, score in samples))
    return folder


def healthy(prompts: int = 4, n: int = 4) -> list[tuple[str, str, float]]:
    """Groups whose samples differ, one right answer in each."""
    return [(f"q{p}", f"<think>try {k}</think> <answer>{p + k}</answer>", 1.0 if k == 0 else 0.0)
            for p in range(prompts) for k in range(n)]


def _ids(folder: Path) -> dict[str, Finding]:
    return {f.rule: f for f in dump_findings(read_dump(folder))[0]}


def test_the_reader_takes_steps_from_file_names_keeps_extra_keys_and_names_bad_lines(tmp_path):
    folder = write_dump(tmp_path / "dump", {2: healthy(1, 2), 10: healthy(1, 3)}, acc=True)
    (folder / "10.jsonl").write_text((folder / "10.jsonl").read_text() + "not json\n{\"input\": \"q\"}\n")
    (folder / "notes.jsonl").write_text("{}\n")  # no step file
    dump = read_dump(folder)
    assert dump.step_numbers() == [2, 10] and dump.sample_count() == 5
    assert dump.extra_keys(10) == ["acc"]
    assert dump.problems == ["10.jsonl:4: not JSON", "10.jsonl:5: no text `output`"]
    assert is_dump_dir(folder) and not is_dump_dir(folder / "2.jsonl") and not is_dump_dir(tmp_path / "none")


def test_the_reader_refuses_what_is_no_dump(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_dump(tmp_path / "missing")
    (tmp_path / "1.jsonl").write_text("{}\n")
    with pytest.raises(NotADirectoryError):
        read_dump(tmp_path / "1.jsonl")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no \\{step\\}.jsonl"):
        read_dump(tmp_path / "empty")


@pytest.mark.parametrize(("text", "unit", "repeats"), [
    ("The answer is " + "!" * 40, "!", 40),
    ("answer: " + "the " * 20, " the", 20),
    ("ab" * 16 + "  \n", "ab", 16),
    ("Hm. " + "I will check again. " * 17, " I will check again.", 17),  # a sentence, its unit read from the end
])
def test_a_loop_to_the_end_is_degenerate(text, unit, repeats):
    assert looping_tail(text) == (unit, repeats)


@pytest.mark.parametrize("text", [
    "x" * 31,  # below 32 characters
    "ab" * 15,  # 15 repeats
    "=" * 60 + "\nso the answer is 5",  # a separator inside the response
    "The total is 1000000.",
    "",
])
def test_text_that_does_not_loop_to_its_end_is_not(text):
    assert looping_tail(text) is None


@pytest.mark.parametrize(("text", "flagged"), [
    ("<think>x</think> <answer></answer>", True),
    ("<think>x</think> <answer>  </answer>", True),
    ("<think>x</think>", True),
    ("<think>x</think> \\boxed{}", True),
    ("<answer></answer>", True),
    ("<think>x</think> <answer>5</answer>", False),
    ("<think>x</think> so it is 5", False),  # R1's format: the answer after the reasoning
    ("<think>x</think> \\boxed{\\frac{1}{2}}", False),
    ("<think>x</think>\n#### 42", False),
    ("<think>x is long and cut off", False),  # truncated: the answer was never reached
    ("<think>x</think> <answer>3+", False),
    ("no format at all", False),
    ("<think>x</think> ```html\n<div></div>\n```", False),  # a code answer's own tags are no format
    ("<think>x</think> <answer></answer> so it is 5", False),  # an answer in prose beside an empty tag
])
def test_a_format_without_an_answer(text, flagged):
    assert format_without_answer(text) is flagged


def test_a_healthy_dump_has_no_finding(tmp_path):
    assert dump_findings(read_dump(write_dump(tmp_path, {1: healthy(), 2: healthy()})))[0] == []


def test_degenerate_text_names_its_step_and_samples(tmp_path):
    step_2 = healthy()
    for i in (1, 9):
        step_2[i] = (step_2[i][0], "<think>let me " + "!" * 50, 0.0)
    for i in (6, 14):
        step_2[i] = (step_2[i][0], "<think>so so so " + "so " * 30, 0.0)
    found = _ids(write_dump(tmp_path, {1: healthy(), 2: step_2}))
    assert list(found) == ["dump_degenerate_text"]
    finding = found["dump_degenerate_text"]
    assert (finding.id, finding.severity, finding.first_step, finding.last_step) == ("degenerate_rollout", "critical",
                                                                                     2, 2)
    assert finding.evidence == [{"metric": "rollout_dump/degenerate_text", "step": 2, "value": 0.25,
                                 "range": ">= 0.25 of samples", "status": "bad", "samples": [1, 6, 9, 14]}]


def test_a_quarter_of_the_samples_makes_the_finding(tmp_path):
    """2 of 16 looping responses stay below the share (a small model's occasional loop); 4 of 16 reach it."""
    few, quarter = healthy(), healthy()
    for i in (1, 5):
        few[i] = (few[i][0], "!" * 40, 0.0)
    for i in (1, 5, 9, 13):
        quarter[i] = (quarter[i][0], "!" * 40, 0.0)
    assert _ids(write_dump(tmp_path / "few", {1: few})) == {}
    finding = _ids(write_dump(tmp_path / "quarter", {1: quarter}))["dump_degenerate_text"]
    assert finding.evidence[0]["samples"] == [1, 5, 9, 13] and finding.evidence[0]["value"] == 0.25


def test_empty_outputs(tmp_path):
    samples = healthy()
    for i in range(0, 16, 2):
        samples[i] = (samples[i][0], "  \n", 0.0)
    finding = _ids(write_dump(tmp_path, {3: samples}))["dump_empty_output"]
    assert finding.id == "degenerate_rollout" and finding.evidence[0]["samples"] == [0, 2, 4, 6, 8, 10, 12, 14]
    assert "are empty" in finding.explanation["en"] and "为空" in finding.explanation["zh"]


def test_a_paid_format_without_an_answer_is_reward_hacking_and_an_unpaid_one_is_not(tmp_path):
    paid, unpaid = healthy(), healthy()
    for i in (1, 2, 5, 6, 9, 10, 13, 14):  # half of each group: the groups still differ
        paid[i] = (paid[i][0], "<think>hm</think> <answer></answer>", 0.1)
        unpaid[i] = (unpaid[i][0], "<think>hm</think> <answer></answer>", 0.0)
    finding = _ids(write_dump(tmp_path / "paid", {5: paid}))["dump_format_without_answer"]
    assert finding.id == "reward_hacking" and finding.evidence[0]["samples"] == [1, 2, 5, 6, 9, 10, 13, 14]
    assert "reward.format_score" not in finding.fix  # an llm run's fix: verl's keys
    assert _ids(write_dump(tmp_path / "unpaid", {5: unpaid})) == {}


def test_groups_answering_with_one_text_below_the_best_score(tmp_path):
    alike = healthy()
    for i in range(8):  # q0 and q1: four identical wrong answers each; q2, q3 differ
        alike[i] = (alike[i][0], f" <answer>{i // 4}</answer>", 0.0)
    solved = healthy()
    for i in range(8):  # the same prompts answered alike and right: a solved prompt, not a collapse
        solved[i] = (solved[i][0], "<answer>7</answer>", 1.0)
    finding = _ids(write_dump(tmp_path / "alike", {4: alike}))["dump_group_one_text"]
    assert finding.id == "overly_deterministic" and finding.evidence[0]["samples"] == list(range(8))
    assert finding.evidence[0]["value"] == 0.5 and finding.evidence[0]["range"] == ">= 0.5 of groups"
    assert _ids(write_dump(tmp_path / "solved", {4: solved})) == {}


def test_add_to_report_withdraws_a_healthy_verdict_and_regroups(tmp_path):
    samples = [(p, "!" * 64, 0.0) for p, _, _ in healthy()]
    dump = read_dump(write_dump(tmp_path, {7: samples}))
    report = Report(findings=[Finding("healthy", "info", 1, 9)], steps=9)
    add_to_report(report, dump)
    assert "healthy" not in report.ids() and report.roots()[0] == "degenerate_rollout"
    assert report.rollout_dump == {"dir": str(tmp_path), "steps": [7], "samples": 16}
    assert any("healthy withdrawn" in note for note in report.notes)


def test_the_cli_reads_a_dump_dir_alone_and_beside_a_log(capsys, tmp_path):
    schema = json.loads(SCHEMA_PATH.read_text())
    assert cli.main([str(FIXTURE), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator(schema).validate(document)
    result = document["results"][0]
    assert result["rollout_dump"] == {"dir": str(FIXTURE), "steps": [1, 2, 3], "samples": 48}
    by_rule = {f["rule"]: f for f in result["findings"]}
    assert by_rule["dump_degenerate_text"]["evidence"][0]["samples"] == list(range(8))
    assert by_rule["dump_format_without_answer"]["evidence"][0]["samples"] == list(range(8, 16))
    assert by_rule["dump_group_one_text"]["first_step"] == 2
    log = Path(__file__).parent / "fixtures" / "guide_11_4_example2.log"
    assert cli.main([str(log), "--rollout-dir", str(FIXTURE), "--fail-on", "critical"]) == 1
    text = capsys.readouterr().out
    assert "lr_too_high" in text and "rule dump_degenerate_text" in text and "samples 0, 1, 2" in text
    assert f"rollout dump: {FIXTURE} (3 steps, 48 samples)" in text
    assert cli.main([str(log), "--rollout-dir", str(FIXTURE), "--format", "markdown", "--lang", "zh"]) == 0
    assert "样本 0, 1, 2" in capsys.readouterr().out  # the root's evidence, with its samples


def test_the_cli_refuses_a_bad_dump_before_diagnosing(capsys, tmp_path):
    log = Path(__file__).parent / "fixtures" / "guide_11_4_example2.log"
    assert cli.main([str(log), "--rollout-dir", str(tmp_path / "missing")]) == 2
    captured = capsys.readouterr()
    assert "no such rollout dump dir" in captured.err and captured.out == ""
    with pytest.raises(SystemExit):
        cli.main([str(FIXTURE), "--rollout-dir", str(FIXTURE)])


def test_pasted_text_takes_a_dump_and_follow_refuses_one(capsys):
    line = "step:1 - actor/pg_clipfrac:0.01 - actor/ppo_kl:0.001 - critic/score/mean:0.2"
    assert cli.main(["--text", line, "--rollout-dir", str(FIXTURE), "--json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert result["source"] == "text" and "degenerate_rollout" in {f["id"] for f in result["findings"]}
    log = Path(__file__).parent / "fixtures" / "guide_11_4_example2.log"
    with pytest.raises(SystemExit):
        cli.main([str(log), "--follow", "--rollout-dir", str(FIXTURE)])
    assert "--follow watches the metrics alone" in capsys.readouterr().err
