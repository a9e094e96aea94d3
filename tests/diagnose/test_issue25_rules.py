"""Issue 25 items 2 and 3: the artifacts that are no failure (notes with their verl reference), the failures that hide
in them, and the failures of real LLM logs the catalogue lacked. Every log here is written for its test."""

from __future__ import annotations

import json
import math

import pytest

from playground.diagnose.engine import diagnose
from playground.diagnose.readers import parse_verl_text
from playground.diagnose.report import format_report
from playground.diagnose.sources import diagnose_read
from playground.metrics import STEP


def steps(n: int = 12, **over) -> list[dict[str, float]]:
    """n steps of a GRPO LLM run whose every metric is in the guide's range; `over` replaces a metric by a constant or
    a function of the step (None drops it)."""
    records = []
    for s in range(1, n + 1):
        r = {STEP: float(s), "actor/pg_clipfrac": 0.01, "actor/ppo_kl": 0.002, "actor/entropy": 0.5,
             "actor/grad_norm": 0.4, "actor/pg_loss": 0.004 * (-1) ** s, "actor/kl_loss": 0.01,
             "critic/score/mean": 0.2 + 0.04 * s, "critic/rewards/mean": 0.5, "critic/rewards/std": 0.4,
             "critic/rewards/max": 1.0, "critic/rewards/min": 0.0, "critic/advantages/mean": 0.0,
             "critic/advantages/max": 1.5, "critic/advantages/min": -1.5, "response_length/mean": 300.0,
             "response_length/max": 700.0 + 10 * (s % 3), "response_length/min": 40.0,
             "response_length/clip_ratio": 0.01}
        for key, value in over.items():
            r[key] = value(s) if callable(value) else value
        records.append({k: v for k, v in r.items() if v is not None})
    return records


def console(records: list[dict[str, float]], tail: str = "") -> str:
    """verl's console lines for the records (values as numpy >= 2 prints them), then `tail`."""
    lines = [f"step:{int(r[STEP])} - " + " - ".join(f"{k}:np.float64({v})" for k, v in r.items() if k != STEP)
             for r in records]
    return "\n".join(lines) + "\n" + tail


def notes_named(report, name: str) -> list[str]:
    return [n for n in report.notes if n.startswith(f"{name}:")]


FLAT = {"critic/score/mean": 0.3}


# ---- item 2: artifacts --------------------------------------------------------------------------------------------
def test_on_policy_zeros_are_a_note_not_convergence_nor_a_dead_run():
    """One mini-batch and one epoch: ppo_kl and pg_clipfrac exactly 0 every step (verl #791, #1477)."""
    report = diagnose(steps(20, **{"actor/ppo_kl": 0.0, "actor/pg_clipfrac": 0.0, **FLAT}), family="llm",
                      info={"score_target": 0.9})
    assert "converged" not in report.ids() and "lr_too_low" not in report.ids()
    (note,) = notes_named(report, "on_policy_zeros")
    assert "on-policy shortcut" in note and "#791" in note


def test_a_zero_ppo_kl_alone_is_not_convergence():
    """verl consoles print 3 decimals: a ppo_kl of 0.000 with a small clipfrac is not measured stillness; convergence
    is read on the score (at its target, flat), which the zeros neither make nor unmake (issue 38)."""
    still = {"actor/ppo_kl": 0.0, "actor/pg_clipfrac": 0.01}
    assert "converged" not in diagnose(steps(**still, **{"critic/score/mean": 0.5}), family="llm",
                                       info={"score_target": 1.0}).ids()
    assert "converged" in diagnose(steps(**still, **{"critic/score/mean": 1.0}), family="llm",
                                   info={"score_target": 1.0}).ids()


def test_converged_is_never_said_of_a_rising_score():
    quiet = {"actor/ppo_kl": 5e-5, "actor/pg_clipfrac": 0.01}
    high = {"critic/score/max": 1.0, "critic/score/min": 0.0}  # a 0/1 reward: the batch's best is 1
    assert "converged" not in diagnose(steps(**quiet), family="llm").ids()  # no target, the score still rising
    # no target: flat near the batch's best is converged, flat at 0.3 of it is not (issue 38)
    assert "converged" in diagnose(steps(**quiet, **high, **{"critic/score/mean": 0.95}), family="llm").ids()
    assert "converged" not in diagnose(steps(**quiet, **high, **FLAT), family="llm").ids()
    assert "converged" in diagnose(steps(**quiet, **{"critic/score/mean": 1.0}), family="llm",
                                   info={"score_target": 1.0}).ids()


def test_v1_clip_ratio_is_a_note_and_no_truncation_below_the_configured_maximum():
    """verl V1 compares each length with the batch's longest (#7817): clip_ratio never 0, large in a batch of equal
    lengths, while the longest response stays far below data.max_response_length."""
    v1 = steps(**FLAT, **{"response_length/clip_ratio": 0.6, "response_length/mean": 650.0})
    read = parse_verl_text(console(v1), name="v1.log")
    assert "response_truncation" in diagnose_read(read).ids()  # the cap unknown: clip_ratio taken at its word
    report = diagnose_read(read, max_response_length=2048)
    assert "response_truncation" not in report.ids()
    (note,) = notes_named(report, "clip_ratio_v1")
    assert "#7817" in note and "#7823" in note


def test_truncation_that_clip_ratio_misses_is_found_from_the_lengths():
    """With rollout.max_model_len binding clip_ratio says 0 (#7823); the longest response at the cap and the mean
    near it tell the truncation."""
    hidden = steps(**FLAT, **{"response_length/clip_ratio": 0.0, "response_length/max": 1024.0,
                              "response_length/mean": 900.0})
    report = diagnose(hidden, family="llm", info={"max_response_length": 1024})
    finding = next(f for f in report.findings if f.id == "response_truncation")
    assert finding.rule == "response_truncation_at_cap"
    assert "response_truncation" not in diagnose(hidden, family="llm").ids()  # the cap unknown: nothing to say
    learning = steps(**{"response_length/clip_ratio": 0.0, "response_length/max": 1024.0,
                        "response_length/mean": 900.0})
    assert "response_truncation" not in diagnose(learning, family="llm", info={"max_response_length": 1024}).ids()


def test_the_cli_takes_the_configured_maximum(capsys):
    from playground.diagnose.__main__ import main

    line = ("step:7 - response_length/clip_ratio:0.6 - response_length/max:650 - response_length/mean:640 - "
            "critic/score/mean:0.3")
    def found() -> list[str]:  # the findings' ids (a skipped rule names its id too)
        return [f["id"] for f in json.loads(capsys.readouterr().out)["results"][0]["findings"]]

    assert main(["--text", line, "--json"]) == 0
    assert "response_truncation" in found()
    assert main(["--text", line, "--json", "--max-response-length", "2048"]) == 0
    assert "response_truncation" not in found()


def test_a_gradient_norm_above_the_clip_is_noted_as_pre_clip():
    report = diagnose(steps(**{"actor/grad_norm": lambda s: 2.5 if s in (3, 7) else 0.4}), family="llm")
    (note,) = notes_named(report, "grad_norm_pre_clip")
    assert "before clipping" in note and "optimizer_step" in note
    assert "gradient_explosion" not in report.ids()
    assert notes_named(diagnose(steps(), family="llm"), "grad_norm_pre_clip") == []


TRACEBACK = """Traceback (most recent call last):
  File "/opt/verl/verl/trainer/main_ppo.py", line 42, in main
    run_ppo(config)
  File "/opt/verl/verl/trainer/ppo/v1/trainer_base.py", line 900, in fit
    raise ValueError("Generated too many. Please check your data.")
ValueError: Generated too many. Please check your data.
(TaskRunner pid=77) shutting down
"""


def test_a_log_that_ends_in_an_exception_says_how_the_run_ended():
    read = parse_verl_text(console(steps(8)), name="run.log")
    assert read.ended_with == "" and "healthy" in diagnose_read(read).ids()
    read = parse_verl_text(console(steps(8), TRACEBACK), name="run.log")
    assert read.ended_with == "ValueError: Generated too many. Please check your data."
    report = diagnose_read(read)
    assert "healthy" not in report.ids()
    assert any("ends after its last step in" in n and "ValueError: Generated too many" in n for n in report.notes)


def test_an_exception_the_run_survived_is_not_its_end():
    records = steps(8)
    text = console(records[:4], TRACEBACK) + console(records[4:])
    assert parse_verl_text(text, name="run.log").ended_with == ""


def test_a_ray_wrapped_out_of_memory_still_reads_as_oom():
    text = console(steps(6), "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n"
                             "ray.exceptions.RayTaskError(OutOfMemoryError): ray::main_task()\n")
    read = parse_verl_text(text, name="run.log")
    assert read.out_of_memory and read.ended_with.startswith("ray.exceptions.RayTaskError(OutOfMemoryError)")
    assert "out_of_memory" in diagnose_read(read).ids()


# ---- item 3: the failures the catalogue lacked --------------------------------------------------------------------
def test_entropy_explosion_from_a_v1_console_log():
    """Entropy to several nats with the length and grad_norm while the score falls (verl #1066, #2738)."""
    exploding = steps(14, **{"actor/entropy": lambda s: 0.6 * 1.25 ** s,
                             "response_length/mean": lambda s: 300.0 + 60 * s,
                             "actor/grad_norm": lambda s: 0.3 * 1.2 ** s,
                             "critic/score/mean": lambda s: 0.7 - 0.04 * s})
    report = diagnose_read(parse_verl_text(console(exploding), name="v1.log"))
    assert "entropy_explosion" in report.roots()
    finding = next(f for f in report.findings if f.id == "entropy_explosion")
    assert finding.severity == "warning" and "entropy_coeff=0.0" in finding.fix
    # the same climb while the score rises (a policy widening on purpose) is no explosion
    rising = [dict(r, **{"critic/score/mean": 0.2 + 0.04 * r[STEP]}) for r in exploding]
    assert "entropy_explosion" not in diagnose(rising, family="llm").ids()


def test_entropy_explosion_on_a_token_task_needs_only_its_calibrated_growth():
    """A 17-token policy that starts at 1.66 nats cannot grow x1.5 short of uniform: the token family's growth is 0.2
    (rules.yaml, calibrated). The climb below, +0.36 within 10 steps above 2 nats, is reverse's scenario's shape."""
    climbing = steps(14, **{"actor/entropy": lambda s: min(2.7, 1.66 + 0.1 * s),
                            "response_length/mean": lambda s: min(7.6, 5.8 + 0.18 * s),
                            "critic/score/mean": 0.0, "val/score": lambda s: max(0.0, 0.5 - 0.05 * s)})
    info = {"max_entropy": math.log(17), "action_space": "token"}
    assert "entropy_explosion" in diagnose(climbing, info=info, family="token").roots()
    assert "entropy_explosion" not in diagnose(climbing, family="llm").ids()  # the guide's x1.5
    # near miss: the same climb while the held-out score rises (a policy widening on purpose)
    widening = [dict(r, **{"val/score": 0.5 + 0.02 * r[STEP]}) for r in climbing]
    assert "entropy_explosion" not in diagnose(widening, info=info, family="token").ids()


def test_the_garbage_collapse_is_a_degenerate_rollout():
    """'!!!!' output: entropy near ln(vocabulary), nothing scores, every response at the cap."""
    garbage = steps(6, **{"actor/entropy": 10.6, "critic/score/mean": 0.0, "critic/rewards/mean": 0.0,
                          "critic/rewards/max": 0.0, "critic/rewards/min": 0.0, "response_length/clip_ratio": 1.0,
                          "response_length/mean": 1024.0, "response_length/max": 1024.0,
                          "response_length/min": 1024.0})
    report = diagnose_read(parse_verl_text(console(garbage), name="garbage.log"))
    assert report.roots()[0] == "degenerate_rollout" and report.worst_severity() == "critical"
    consequences = {c.id for d in report.diagnoses if d.root.id == "degenerate_rollout" for c in d.consequences}
    assert "response_truncation" in consequences
    # sharp, long, unrewarded answers: a hard task, not garbage
    sharp = [dict(r, **{"actor/entropy": 0.3}) for r in garbage]
    assert "degenerate_rollout" not in diagnose(sharp, family="llm").ids()
    # a known small vocabulary: the entropy is judged against its maximum
    assert "degenerate_rollout" in diagnose([dict(r, **{"actor/entropy": 2.0}) for r in garbage], family="llm",
                                            info={"max_entropy": math.log(10)}).ids()


def test_a_rollout_whose_weights_never_arrived_is_a_degenerate_rollout_not_a_mismatch():
    """verl's load_format=dummy with a broken sync: the trainer is sharp, the rollout samples uniformly (its own
    log-perplexity ln V), its probabilities are apart from the trainer's on every token; a small vocabulary ends some
    uniform responses by chance (token family: 0.5 of them at the cap)."""
    vocab = math.log(17)
    garbage = steps(6, **{"actor/entropy": 1.7, "critic/score/mean": 0.0, "critic/rewards/max": 0.0,
                          "critic/rewards/min": 0.0, "critic/rewards/std": 0.0, "response_length/clip_ratio": 0.65,
                          "response_length/max": 8.0, "response_length/min": 1.0, "response_length/mean": 6.7,
                          "rollout_corr/rollout_log_ppl": vocab, "training/rollout_probs_diff_mean": 0.07,
                          "rollout_corr/chi2_token": 3.0})
    report = diagnose(garbage, family="token", info={"max_entropy": vocab})
    assert report.roots()[0] == "degenerate_rollout" and "rollout_mismatch" not in report.ids()
    assert "actor_rollout_ref.rollout.weight_sync=full" in next(f.fix for f in report.findings
                                                                if f.id == "degenerate_rollout")
    # a rollout as sharp as a healthy one (0.6 of the maximum) with the same gap is a mismatch, not garbage
    sharp = [dict(r, **{"rollout_corr/rollout_log_ppl": 0.6 * vocab}) for r in garbage]
    report = diagnose(sharp, family="token", info={"max_entropy": vocab})
    assert "degenerate_rollout" not in report.ids() and "rollout_mismatch" in report.ids()
    # the guide's "every response at the cap" is the LLM families' (a 32k vocabulary never samples its end token)
    assert "degenerate_rollout" not in diagnose(garbage, family="llm", info={"max_entropy": vocab}).ids()
    # the trainer near-uniform too (a rollout temperature far above 1: exercise 07) is a sampling knob's, not a sync's
    hot = [dict(r, **{"actor/entropy": 0.95 * vocab}) for r in garbage]
    assert "degenerate_rollout" not in diagnose(hot, family="token", info={"max_entropy": vocab}).ids()


@pytest.mark.parametrize("key", ["critic/advantages/zero_adv_ratio", "train/zero_adv_group_ratio",
                                 "frac_reward_zero_std"])
def test_a_batch_of_zero_advantages_with_a_flat_score_has_no_learning_signal(key):
    """Nearly every group all right or all wrong, the score flat (verl RFC #7405, PR #5770; TRL's name)."""
    silent = steps(12, **{key: 0.98, **FLAT})
    read = parse_verl_text(console(silent), name="grpo.log")
    report = diagnose_read(read)
    finding = next(f for f in report.findings if f.id == "no_learning_signal")
    assert "no_learning_signal_zero_adv_share" in finding.rule


def test_a_high_zero_advantage_share_in_a_run_that_learns_is_no_finding():
    """PR #5770 measured 63% zero-advantage responses in a run that learned."""
    assert "no_learning_signal" not in diagnose(steps(12, **{"critic/advantages/zero_adv_ratio": 0.63}),
                                                family="llm").ids()
    assert "no_learning_signal" not in diagnose(steps(12, **{"critic/advantages/zero_adv_ratio": 0.99}),
                                                family="llm").ids()  # the score rises: the few groups teach


def _sparkline_block(score: str) -> str:
    """wandb's end-of-run block for a 200-step run: entropy falling steadily, kl_loss rising, the score as drawn."""
    return f"""wandb: Run history:
wandb:       actor/entropy █▇▇▆▆▅▅▄▄▄▃▃▃▂▂▂▂▁▁▁
wandb:       actor/kl_loss ▁▁▁▂▂▂▃▃▄▄▅▅▅▆▆▇▇▇██
wandb:   critic/score/mean {score}
wandb: training/global_step ▁▁▂▂▂▃▃▃▄▄▅▅▅▆▆▆▇▇██
wandb:
wandb: Run summary:
wandb:       actor/entropy 0.06
wandb:       actor/kl_loss 0.021
wandb:   critic/score/mean 0.31
wandb: training/global_step 200
"""


def test_a_sparkline_trend_is_a_finding_with_low_confidence():
    read = parse_verl_text(_sparkline_block("▄▅▄▄▅▄▄▄▅▄▄▄▄▅▄▄▄▄▅▄"), name="wandb.txt")
    assert read.kind == "wandb_history"
    report = diagnose_read(read)
    finding = next(f for f in report.findings if f.id == "entropy_collapse")
    assert finding.rule == "entropy_collapse_steady" and finding.confidence == "low"
    assert "low confidence: read from wandb's sparklines" in format_report([("wandb.txt", report)], "en")
    rising = parse_verl_text(_sparkline_block("▁▁▂▂▂▃▃▃▄▄▅▅▅▆▆▆▇▇██"), name="wandb.txt")
    assert "entropy_collapse" not in diagnose_read(rising).ids()  # the score rose: sharpening that paid


def test_the_same_trend_in_numbers_is_said_with_full_confidence():
    falling = steps(20, **{"actor/entropy": lambda s: 0.5 * 0.9 ** s, "actor/kl_loss": lambda s: 0.002 * s, **FLAT})
    report = diagnose(falling, family="llm")
    finding = next(f for f in report.findings if f.rule == "entropy_collapse_steady")
    assert finding.confidence == "high"
