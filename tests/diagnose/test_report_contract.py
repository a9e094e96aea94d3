"""The diagnosis as a tool for CI (issue 51): the `--json` report against its shipped schema, the exit codes (0
judged, 1 a finding at --fail-on, 2 no verdict) and the rules that did not run, with what they need."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema  # altair's dependency (a declared one): the schema checked by a real validator
import pytest

from playground.diagnose import __main__ as cli
from playground.diagnose.engine import Report, diagnose
from playground.diagnose.report import SCHEMA_PATH, SCHEMA_VERSION, format_diagnosis, format_markdown
from playground.failures import FAILURE_IDS
from playground.metrics import STEP

FIXTURES = Path(__file__).parent / "fixtures"
REAL = FIXTURES / "real"
SCHEMA = json.loads(SCHEMA_PATH.read_text())
LOGS = [FIXTURES / "guide_11_4_example1.log", FIXTURES / "wandb_history.csv", FIXTURES / "junk.log",
        REAL / "qwen3_8b_grpo_dapo17k_verl07_megatron_truncation.log", REAL / "userrl_issue4_flashattn_importerror.log",
        REAL / "gemma2b_ppo_gsm8k_verldata.log", REAL / "qwen25_7b_grpo_gsm8k_wandb.txt"]


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_schema_is_a_valid_draft_2020_12_schema_with_the_catalogues_ids():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["properties"]["schema_version"]["const"] == SCHEMA_VERSION and SCHEMA["$id"]
    assert SCHEMA["$defs"]["ruleId"]["enum"] == list(FAILURE_IDS)  # a new id in the catalogue: add it here too


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_real_reports_validate_against_the_schema(capsys, log):
    code, out, _ = _cli(capsys, log, "--json")
    document = json.loads(out)
    jsonschema.Draft202012Validator(SCHEMA).validate(document)
    assert document["schema_version"] == SCHEMA_VERSION and code in (0, 2)


def test_a_multirun_dir_and_a_broken_report_against_the_schema(tmp_path, capsys):
    for seed in (1, 2):
        run = tmp_path / f"run{seed}"
        run.mkdir()
        (run / "run.json").write_text(json.dumps({"family": "gym", "score_target": 400.0}))
        (run / "metrics.jsonl").write_text("".join(json.dumps(
            {STEP: s, "actor/pg_clipfrac": 0.01, "actor/ppo_kl": 0.001, "critic/score/mean": 10.0 + s}) + "\n"
            for s in range(1, 13)))
    document = json.loads(_cli(capsys, tmp_path, "--json")[1])
    validator = jsonschema.Draft202012Validator(SCHEMA)
    validator.validate(document)
    assert len(document["results"]) == 2
    document["results"][0]["skipped_rules"][0]["id"] = "no_such_rule"
    assert not validator.is_valid(document)  # the ids are the catalogue's: a made-up one fails


def test_the_schemas_fields_are_what_the_report_produces():
    result = SCHEMA["$defs"]["result"]
    produced = set(Report(findings=[]).to_dict())
    # a result is findings.json's document (to_dict, its `version` and date) with its source and steps; `replay`
    # is --replay's, `rollout_dump` --rollout-dir's (a report with a dump read beside its log)
    assert set(result["properties"]) == produced | {"version", "diagnosed_at", "replay", "rollout_dump"}
    assert set(result["required"]) == produced | {"version", "diagnosed_at"}
    assert set(SCHEMA["properties"]) == set(SCHEMA["required"]) == {"schema_version", "version", "results"}


# ---- exit codes: 0 judged, 1 a finding at --fail-on, 2 no verdict (with its reason on stderr) -----------------
def test_exit_0_when_judged_and_1_for_a_finding_at_fail_on(capsys):
    log = REAL / "qwen3_8b_grpo_dapo17k_verl07_megatron_truncation.log"  # response_truncation: a warning
    assert _cli(capsys, log, "--fail-on", "critical")[0] == 0
    assert _cli(capsys, log, "--fail-on", "warning")[0] == 1


@pytest.mark.parametrize("name,content,reason", [
    ("missing.log", None, "nothing at"),
    ("notes.txt", "hello, no metrics here\n", "no verl step lines"),
    ("blob.bin", "\x00\x01\x02", "no verl step lines"),
    ("emptydir", "dir", "no metrics.jsonl and no TensorBoard event files"),
])
def test_exit_2_when_nothing_could_be_judged_with_one_line_of_reason(tmp_path, capsys, name, content, reason):
    path = tmp_path / name
    if content == "dir":
        path.mkdir()
    elif content is not None:
        path.write_text(content)
    code, _, err = _cli(capsys, path, "--fail-on", "warning")
    assert code == 2 and err.startswith("error:") and reason in err and err.count("\n") == 1, err


def test_exit_2_for_a_file_it_may_not_read(tmp_path, capsys, monkeypatch):
    def refuse(path, **_):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(cli, "diagnose_path", refuse)  # root reads any file: the refusal is the reader's
    code, _, err = _cli(capsys, tmp_path / "locked.log")
    assert code == 2 and "Permission denied" in err and err.count("\n") == 1


# ---- the rules that did not run ----------------------------------------------------------------------------
def test_skipped_rules_name_the_missing_metrics_the_steps_and_the_score_target(capsys):
    records = [{STEP: s, "actor/pg_clipfrac": 0.0005, "actor/ppo_kl": 0.0001, "critic/score/mean": 10.0 + 0.01 * s}
               for s in range(1, 13)]
    without = diagnose(records, info={"family": "gym"})
    skipped = {s["rule"]: s for s in without.skipped_rules}
    assert skipped["lr_too_low_slow_progress"]["reason"] == "missing_fact"
    assert "task.score_target" in skipped["lr_too_low_slow_progress"]["needs"][0]
    assert skipped["critic_undertrained"] == {"id": "critic_undertrained", "rule": "critic_undertrained",
                                              "reason": "missing_metrics", "needs": ["critic/vf_explained_var"]}
    with_target = diagnose(records, info={"family": "gym", "score_target": 400.0})
    assert "lr_too_low_slow_progress" not in {s["rule"] for s in with_target.skipped_rules}
    short = {s["rule"]: s for s in diagnose(records[:3], info={"family": "gym"}).skipped_rules}
    assert short["lr_too_low"] == {"id": "lr_too_low", "rule": "lr_too_low", "reason": "too_few_steps",
                                   "needs": ["10 steps with its metrics (the log has 3)"]}
    short_text = format_diagnosis("short", diagnose(records[:3], info={"family": "gym"}))
    assert "too little data:" in short_text  # too few steps: the notes' own folded line, not the "not run" one
    assert "lr_too_low," not in next(line for line in short_text.splitlines() if "not run:" in line)

    text, markdown = format_diagnosis("run", without), format_markdown("run", without)
    line = next(line for line in text.splitlines() if "not run:" in line)
    assert "critic/vf_explained_var for critic_undertrained" in line and "score_target" in line
    assert sum("not run:" in line for line in markdown.splitlines()) == 1


def test_skipped_rules_in_json_and_no_line_without_a_step(capsys):
    document = json.loads(_cli(capsys, FIXTURES / "guide_11_4_example1.log", "--json")[1])
    skipped = document["results"][0]["skipped_rules"]
    assert {"id": "response_truncation", "rule": "response_truncation", "reason": "missing_metrics",
            "needs": ["response_length/clip_ratio"]} in skipped
    assert {s["id"] for s in skipped} <= set(FAILURE_IDS)
    assert "not run:" not in format_diagnosis("empty", diagnose([]))
