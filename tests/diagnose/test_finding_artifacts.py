"""What a finding leans on (diagnose/artifacts.py `finding_artifacts`, leans.yaml): critic/advantages/mean is a token
mean (verl #4927, #4747), the entropy's level differs across verl versions (thunlp/JustRL #5), Megatron's kl_loss and
grad_norm are on another scale than FSDP's (verl #4710, Trinity-RFT #471). Logs written for the test."""

from __future__ import annotations

import json

import jsonschema

from playground.diagnose.artifacts import leans
from playground.diagnose.engine import diagnose
from playground.diagnose.readers import parse_verl_text
from playground.diagnose.report import SCHEMA_PATH, dumps, format_markdown, format_report
from playground.diagnose.sources import diagnose_read
from playground.metrics import STEP


def records(n: int, **metrics) -> list[dict[str, float]]:
    """n steps of the given metrics, each a function of the step."""
    return [{STEP: float(s), **{k.replace("__", "/"): f(s) for k, f in metrics.items()}} for s in range(1, n + 1)]


def console(recs: list[dict[str, float]], head: str = "") -> str:
    return head + "\n".join(f"step:{int(r[STEP])} - " + " - ".join(f"{k}:{v}" for k, v in r.items() if k != STEP)
                            for r in recs) + "\n"


def notes_of(report, finding_id: str) -> dict[str, dict]:
    finding = next(f for f in report.findings if f.id == finding_id)
    return {note["name"]: note for note in finding.artifacts}


# advantages far from the unit scale: advantage_not_normalized reads |critic/advantages/mean|
UNNORMALIZED = dict(critic__advantages__mean=lambda s: 5.0, critic__advantages__max=lambda s: 30.0,
                    critic__advantages__min=lambda s: -25.0, critic__score__mean=lambda s: 0.3)
# the entropy falling to nothing while the score stays low: entropy_collapse reads the entropy's level
COLLAPSING = dict(critic__score__mean=lambda s: 0.2, actor__pg_clipfrac=lambda s: 0.01, actor__ppo_kl=lambda s: 0.001)
# the gradient norm climbing far past the clip: gradient_explosion reads actor/grad_norm's size
EXPLODING = dict(actor__grad_norm=lambda s: 20.0 * 1.3 ** s, critic__score__mean=lambda s: 0.3)


def test_the_table_holds_the_three_and_each_in_both_languages():
    assert {note["name"] for note in leans()} == {"advantages_token_mean", "entropy_across_versions", "megatron_scale"}
    assert all(note["note"]["en"] and note["note"]["zh"] for note in leans())


def test_a_finding_on_the_advantages_mean_says_it_is_a_token_mean():
    report = diagnose(records(8, **UNNORMALIZED), family="llm")
    note = notes_of(report, "advantage_not_normalized")["advantages_token_mean"]
    assert "mean over response tokens" in note["en"] and "token" in note["zh"] and "#4927" in note["reference"]
    # a finding whose evidence does not read the advantages carries no such note
    exploding = diagnose(records(8, **EXPLODING), family="llm")
    assert "advantages_token_mean" not in notes_of(exploding, "gradient_explosion")


def entropy(key: str) -> dict:
    return {**COLLAPSING, key: lambda s: max(0.6 - 0.06 * s, 0.001)}


def test_an_entropy_finding_on_a_log_of_older_or_unknown_verl_says_versions_differ():
    older = diagnose_read(parse_verl_text(console(records(12, **entropy("actor__entropy_loss"))), name="old.log"))
    note = notes_of(older, "entropy_collapse")["entropy_across_versions"]
    assert "older than 0.4" in note["en"] and "低于 0.4" in note["zh"] and "JustRL #5" in note["reference"]
    unknown = diagnose_read(parse_verl_text(console(records(12, **entropy("actor__entropy"))), name="new.log"))
    assert "not in the log" in notes_of(unknown, "entropy_collapse")["entropy_across_versions"]["en"]
    # the playground's own run knows its version: no note
    own = diagnose(records(12, **entropy("actor__entropy")), family="llm")
    assert "entropy_across_versions" not in notes_of(own, "entropy_collapse")


def test_a_grad_norm_finding_under_megatron_says_its_scale_differs():
    head = "(TaskRunner pid=7) actor_rollout_ref.actor.strategy=megatron actor_rollout_ref.actor.megatron.tp=4\n"
    megatron = diagnose_read(parse_verl_text(console(records(8, **EXPLODING), head), name="meg.log"))
    note = notes_of(megatron, "gradient_explosion")["megatron_scale"]
    assert "line 1 of the log names it" in note["en"] and "Megatron" in note["zh"] and "#4710" in note["reference"]
    fsdp = diagnose_read(parse_verl_text(console(records(8, **EXPLODING)), name="fsdp.log"))
    assert "megatron_scale" not in notes_of(fsdp, "gradient_explosion")
    # a run whose config says so (a run dir's .hydra/config.yaml)
    config = {"actor_rollout_ref": {"actor": {"strategy": "megatron"}}}
    assert "megatron_scale" in notes_of(diagnose(records(8, **EXPLODING), family="llm", config=config),
                                        "gradient_explosion")


def test_the_notes_are_in_the_text_markdown_and_json_reports():
    report = diagnose_read(parse_verl_text(console(records(8, **UNNORMALIZED)), name="adv.log"))
    assert "advantage_not_normalized" in report.ids()
    assert "read with care: critic/advantages/mean is a mean over response tokens" in format_report([("a", report)])
    assert "解读提示" in format_report([("a", report)], lang="zh")
    assert "read with care: critic/advantages/mean" in format_markdown("a", report)
    document = json.loads(dumps([("adv.log", report)]))
    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(document)
    finding = next(f for f in document["results"][0]["findings"] if f["id"] == "advantage_not_normalized")
    assert [note["name"] for note in finding["artifacts"]] == ["advantages_token_mean"]


def test_the_docs_example_shows_how_the_run_ended_and_both_notes():
    """docs/diagnose.md's command: tests/diagnose/fixtures/ended_ray_worker_died.log (written for it)."""
    from pathlib import Path

    from playground.diagnose.sources import diagnose_path

    log = Path(__file__).parent / "fixtures" / "ended_ray_worker_died.log"
    ((_, report),) = diagnose_path(log)
    crash = next(f for f in report.findings if f.id == "training_crash")
    (row,) = [e for e in crash.evidence if e["metric"] == "how it ended"]
    assert row["value"].startswith("ray.exceptions.ActorDiedError") and "a candidate" in row["range"]
    assert "megatron_scale" in notes_of(report, "gradient_explosion")
    assert "advantages_token_mean" in notes_of(report, "advantage_not_normalized")
