"""Issue 38: the shapes the diagnosis got wrong on real verl runs it never saw, each on a log written for its test:
crashes, "converged" said of a run falling apart, multi-turn collapse read from logs, reward hacking in its general
form, truncation while learning, plateaus, gradient spikes, saturated groups, a converged run's pg_loss swings, an
excerpt that begins collapsed, a consequence that shows before its cause, and a fix that cures its mechanism."""

from __future__ import annotations

from playground.diagnose.causes import group
from playground.diagnose.engine import Finding, diagnose
from playground.diagnose.readers import parse_verl_text
from playground.diagnose.sources import diagnose_read

from .test_issue25_rules import console, steps

HIGH = {"critic/score/max": 1.0, "critic/score/min": 0.0}  # a 0/1 reward: the batch's best sample scores 1


def report_of(text: str):
    return diagnose_read(parse_verl_text(text, name="test.log"))


# ---- a run that crashed ----------------------------------------------------------------------------------------
def test_a_log_that_ends_in_a_traceback_has_the_crash_as_its_root_with_the_exception_line():
    tail = ("Traceback (most recent call last):\n  File \"verl/trainer/ppo/ray_trainer.py\", line 1040, in fit\n"
            "    metrics.update(reduce_metrics(m))\nValueError: zero-size array to reduction operation maximum\n")
    report = report_of(console(steps(12), tail))
    assert report.roots()[0] == "training_crash" and "healthy" not in report.ids()
    crash = next(f for f in report.findings if f.id == "training_crash")
    assert crash.severity == "critical" and crash.fix == ""  # no knob cures an exception: its traceback says what
    assert any("ValueError: zero-size array" in str(e["value"]) for e in crash.evidence)


def test_a_ray_worker_that_died_on_import_is_a_crash_without_a_step_line():
    """Ray's prefix, frames without their `Traceback` header (a pasted excerpt), the import error last."""
    text = ("(TaskRunner pid=84) File \"/envs/site-packages/flash_attn/__init__.py\", line 3, in <module>\n"
            "(TaskRunner pid=84)   import flash_attn_2_cuda as flash_attn_gpu\n"
            "(TaskRunner pid=84) ImportError: flash_attn_2_cuda.so: undefined symbol: _ZN3c104cuda9SetDeviceEab\n")
    report = report_of(text)
    assert report.roots() == ["training_crash"] and report.steps == 0
    assert any("ImportError" in str(e["value"]) for e in report.findings[0].evidence)


def test_out_of_memory_keeps_its_own_id():
    tail = ("ray.exceptions.RayTaskError(OutOfMemoryError): ray::main_task()\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.16 GiB\n")
    report = report_of(console(steps(3), "Traceback (most recent call last):\n" + tail))
    assert report.roots() == ["out_of_memory"]


# ---- "converged" -----------------------------------------------------------------------------------------------
def test_converged_is_never_said_of_a_falling_score_nor_of_one_step():
    """An agent run of one on-policy update a step (ppo_kl, pg_clipfrac tiny) whose score falls from -0.5 to -0.9."""
    still = {"actor/ppo_kl": 1e-5, "actor/pg_clipfrac": 0.001}
    falling = steps(12, **still, **{"critic/score/mean": lambda s: -0.5 - 0.036 * s})
    assert "converged" not in diagnose(falling, family="llm").ids()
    one = steps(1, **still, **{"critic/score/mean": -0.02})
    assert "converged" not in (ids := diagnose(one, family="llm").ids()) and "inconclusive" in ids


def test_converged_is_a_score_high_for_the_task_and_flat_on_a_full_window():
    flat_high = steps(12, **HIGH, **{"critic/score/mean": lambda s: 0.95 + 0.01 * (s % 2)})
    assert "converged" in diagnose(flat_high, family="llm").ids()
    assert "converged" not in diagnose(flat_high[:8], family="llm").ids()  # a window not yet full
    flat_low = steps(12, **HIGH, **{"critic/score/mean": 0.4})
    assert "converged" not in diagnose(flat_low, family="llm").ids()


# ---- multi-turn failures read from logs ---------------------------------------------------------------------------
AGENT = {"training/num_turns/mean": lambda s: max(2.0, 4.2 - 0.7 * s), "training/num_turns/min": 2.0,
         "tool_call_counts/mean": lambda s: max(0.0, 1.1 - 0.3 * s)}


def test_turns_collapsing_to_one_exchange_while_the_score_falls_is_tool_skip_collapse():
    records = steps(12, **AGENT, **{"critic/score/mean": lambda s: 0.4 - 0.02 * s})
    assert "tool_skip_collapse" in diagnose(records, family="llm").roots()
    # a run pinned at its turn cap has every episode alike too, but keeps its tool
    capped = steps(12, **{"training/num_turns/mean": 4.0, "training/num_turns/min": 4.0,
                          "critic/score/mean": lambda s: 0.4 - 0.02 * s})
    assert "tool_skip_collapse" not in diagnose(capped, family="llm").ids()


def test_the_agent_run_that_was_called_converged():
    """8 steps: the score -0.5 -> -0.9, the entropy tripled, responses grew to the cap, the turns fell to one."""
    records = steps(8, **AGENT, **{"critic/score/mean": lambda s: -0.5 - 0.057 * (s - 1),
                                   "actor/entropy": lambda s: 0.3 * (1 + 0.3 * (s - 1)),
                                   "actor/ppo_kl": 1e-5, "actor/pg_clipfrac": 0.001,
                                   "response_length/mean": lambda s: 600 + 60 * s,
                                   "response_length/clip_ratio": lambda s: 0.1 * s, "response_length/max": 1024.0})
    report = diagnose(records, family="llm")
    assert "converged" not in report.ids()
    assert "entropy_explosion" in report.roots() and "tool_skip_collapse" in report.ids()


# ---- reward hacking, general and length forms ----------------------------------------------------------------------
def _validation(values: dict[int, float]):
    return lambda s: values.get(s)


def test_training_reward_up_while_a_held_out_score_falls_is_reward_hacking_whatever_the_length():
    """verl #5038's shape: the training reward climbs, AIME falls 0.69 -> 0.57, the length flat."""
    aime = _validation({10: 0.62, 20: 0.69, 30: 0.66, 40: 0.60, 50: 0.57})
    records = steps(50, **{"critic/score/mean": lambda s: 0.3 + 0.01 * s,
                           "val-core/aime/reward/mean@1": aime, "response_length/mean": 300.0})
    report = diagnose_read(parse_verl_text(console(records)))  # val-core/... read as the held-out score
    assert "reward_hacking" in report.roots()
    # the same held-out curve with the training reward falling too: a model breaking, not a hack
    broken = steps(50, **{"critic/score/mean": lambda s: 0.8 - 0.01 * s, "val-core/aime/reward/mean@1": aime})
    assert "reward_hacking" not in diagnose_read(parse_verl_text(console(broken))).ids()


def test_length_grown_several_fold_with_the_held_out_score_flat_is_reward_hackings_length_form():
    val = _validation({s: 0.21 + 0.0005 * s for s in range(10, 101, 10)})
    records = steps(100, **{"critic/score/mean": lambda s: 0.2 + 0.007 * s, "val-core/math/reward/mean@1": val,
                            "response_length/mean": lambda s: 380 * (1 + 0.03 * s)})
    assert "reward_hacking" in diagnose_read(parse_verl_text(console(records))).roots()
    learning = _validation({s: 0.21 + 0.004 * s for s in range(10, 101, 10)})  # the held-out score rises with it
    healthy = steps(100, **{"critic/score/mean": lambda s: 0.2 + 0.007 * s, "val-core/math/reward/mean@1": learning,
                            "response_length/mean": lambda s: 380 * (1 + 0.03 * s)})
    assert "reward_hacking" not in diagnose_read(parse_verl_text(console(healthy))).ids()


# ---- truncation while learning, plateaus, spikes, saturated groups ---------------------------------------------------
def test_truncation_at_forty_percent_and_rising_in_a_run_that_learns():
    records = steps(40, **{"response_length/clip_ratio": lambda s: 0.01 * s, "response_length/max": 2048.0})
    assert "response_truncation" in diagnose(records, family="llm").roots()
    # the same run cutting less as it learns to be concise: no failure
    falling = steps(40, **{"response_length/clip_ratio": lambda s: 0.4 - 0.009 * s,
                           "response_length/max": 2048.0})
    assert "response_truncation" not in diagnose(falling, family="llm").ids()


def test_a_score_flat_for_most_of_a_long_run_below_its_ceiling_is_a_plateau_not_healthy():
    """Flat below its ceiling with evidence that it should still rise (issue 51: here, 60 steps of the 400 the run
    was started for); without such evidence the same log has converged (tests/diagnose/test_issue51_rules.py)."""
    records = steps(60, **HIGH, **{"critic/score/mean": lambda s: min(0.45, 0.05 * s) + 0.01 * (s % 3)})
    report = diagnose(records, family="llm", info={"total_steps": 400})
    assert "plateau" in report.roots() and "healthy" not in report.ids()
    assert "plateau" not in diagnose(records, family="llm").ids()
    converged = steps(60, **HIGH, **{"critic/score/mean": lambda s: min(0.96, 0.1 * s) + 0.01 * (s % 2)})
    report = diagnose(converged, family="llm")  # flat near the batch's best: converged, not a plateau
    assert "plateau" not in report.ids() and "converged" in report.ids()


def test_isolated_gradient_spikes_tens_of_times_the_running_level():
    records = steps(60, **{"actor/grad_norm": lambda s: 0.4 * (60 if s in (15, 31, 47) else 1)})
    assert "gradient_spikes" in diagnose(records, family="llm").roots()
    one = steps(60, **{"actor/grad_norm": lambda s: 0.4 * (60 if s == 31 else 1)})
    assert "gradient_spikes" not in diagnose(one, family="llm").ids()  # a single spike: no pattern


def test_a_batch_of_saturated_groups_wastes_its_rollouts():
    """Most GRPO groups all right (or all wrong) and the score flat: the zero-advantage share the rule reads."""
    all_right = steps(30, **HIGH, **{"critic/score/mean": 0.96, "critic/advantages/zero_adv_ratio": 0.75})
    assert "no_learning_signal" in diagnose(all_right, family="llm").roots()
    learning = steps(30, **{"critic/advantages/zero_adv_ratio": 0.63})  # verl #5770's 63 % while the score rises
    assert "no_learning_signal" not in diagnose(learning, family="llm").ids()


# ---- the two recalibrations that broke real runs ---------------------------------------------------------------------
def test_a_converged_run_swinging_its_pg_loss_is_no_unstable_policy_loss():
    """A 7B PPO run at 0.96, flat: token-mean pg_loss swings by 0.4 a step on whitened advantages."""
    records = steps(30, **HIGH, **{"critic/score/mean": lambda s: 0.95 + 0.01 * (s % 3),
                                   "actor/pg_loss": lambda s: 0.2 * (-1) ** s})
    report = diagnose(records, family="llm")
    assert "unstable_policy_loss" not in report.ids()
    low = steps(30, **HIGH, **{"critic/score/mean": 0.4, "actor/pg_loss": lambda s: 0.2 * (-1) ** s})
    assert "unstable_policy_loss" in diagnose(low, family="llm").ids()  # the same swings below the ceiling


def test_an_excerpt_that_begins_after_its_entropy_collapsed():
    """TinyZero after its collapse: entropy_loss 0.004-0.008 nats throughout, one template answer, the score flat."""
    records = steps(20, **HIGH, **{"actor/entropy": None, "actor/entropy_loss": lambda s: 0.004 + 0.0002 * s,
                                   "critic/score/mean": 0.1})
    report = diagnose(records, family="llm")
    assert "entropy_collapse" in report.roots() and "healthy" not in report.ids()


# ---- a consequence that shows before its cause's signature ----------------------------------------------------------
def _finding(fid: str, first: int, last: int, since: int | None = None) -> Finding:
    return Finding(id=fid, severity="warning", first_step=first, last_step=last, since_step=since)


def test_a_consequence_a_few_steps_before_its_causes_signature_hangs_under_it():
    """frozenlake's echo trap: the policy loss swings from step 10, the trap's 15-step window first holds at 15."""
    swings = _finding("unstable_policy_loss", 10, 12)
    trap = _finding("echo_trap", 15, 40, since=1)
    (diagnosis,) = group([swings, trap])
    assert diagnosis.root.id == "echo_trap" and [c.id for c in diagnosis.consequences] == ["unstable_policy_loss"]
    # long over before the window that showed the cause began: an independent problem
    early = _finding("unstable_policy_loss", 3, 5)
    assert [d.root.id for d in group([early, _finding("echo_trap", 25, 40, since=11)])] == ["unstable_policy_loss",
                                                                                           "echo_trap"]


# ---- a fix that cures its mechanism ---------------------------------------------------------------------------------
def test_the_narrowing_collapse_offers_the_whole_training_set_and_keeps_the_exploration_fixes_as_alternatives():
    """countdown on 16 prompts: the entropy bonus, clip-higher, Clip-Cov and KL-Cov were measured not to clear it."""
    records = []
    for s in range(1, 41):
        records.append({"training/global_step": float(s), "actor/entropy": 0.22 * max(0.2, 1 - 0.03 * s),
                        "val/pass@16": 0.98 if s == 1 else 0.98 - 0.004 * s, "val/accuracy": 0.4,
                        "critic/score/mean": min(1.0, 0.6 + 0.02 * s)})
    report = diagnose(records, family="token", info={"score_target": 0.9, "score_metric": "val/accuracy",
                                                     "max_entropy": 3.33})
    finding = next(f for f in report.findings if f.id == "entropy_collapse")
    assert finding.fix == "data.train_max_samples=-1"
    assert not any("entropy_coeff" in a["fix"] for a in finding.alternatives)  # measured not to clear it
    assert any("clip_ratio_high" in a["fix"] for a in finding.alternatives)
    assert any("train_max_samples" in a["fix"] and "pass@16" in a["reference"] for a in finding.alternatives)


def test_a_score_that_reaches_its_target_at_once_and_stays_is_healthy():
    """A probe's score jumps to its target at step 2 and holds: two distinct values are no fall from a peak."""
    records = steps(20, **{"critic/score/mean": lambda s: 0.2 if s == 1 else 1.0})
    assert "healthy" in diagnose(records, family="gym", info={"score_target": 1.0}).ids()
    falling = steps(20, **{"critic/score/mean": lambda s: 0.2 + 0.1 * s if s < 8 else 0.3})
    assert "healthy" not in diagnose(falling, family="gym", info={"score_target": 1.0}).ids()
