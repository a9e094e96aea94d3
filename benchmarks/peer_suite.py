"""A peer's test set: rldoctor's simulated pathologies (`rl_doctor.simulate`, PyPI `rldoctor`, Apache-2.0), written
as the verl log a user would bring, and the catalogue id each one should be named by.

rldoctor's generator writes TRL-style keys; verl logs other names for the same quantities. `VERL_NAMES` is the
mapping (verl's name, and why), and a simulated run goes through the same path a user's verl file-logger JSONL
takes: one `{"step": N, "data": {...}}` line per step, read by `readers.read_any`, diagnosed by `diagnose_read` with
`--max-response-length` set to the simulated config's value, as a user who knows their config would pass it.

Ten of its twelve scenarios can be said with verl's keys; `format_domination` needs reward-component keys verl does
not log (`rewards/correctness/mean`, `rewards/format/mean`), so it is left out, as is nothing else. `EXPECTED` maps
rldoctor's expected detector to this catalogue's id:

| rldoctor scenario | rldoctor detector | catalogue id | why this id |
|---|---|---|---|
| healthy | - | (no warning) | |
| entropy_collapse | entropy_collapse | entropy_collapse | |
| saturated_groups | advantage_collapse | no_learning_signal | most groups all right: zero advantages, wasted rollouts |
| too_hard | advantage_collapse | no_learning_signal | most groups all wrong, the score flat near 0 |
| reward_hacking | reward_hacking | reward_hacking | training reward up, held-out score down |
| length_hacking | length_pathology | reward_hacking | its length form: length x3.6, held-out score flat |
| truncation | length_pathology | response_truncation | clip_ratio 0 -> 0.43 and rising |
| kl_blowup | kl_drift | kl_drift | |
| clip_saturation | clip_saturation | lr_too_high | pg_clipfrac 0.15 -> 0.6: the step too large for the clip |
| grad_spikes | gradient_pathology | gradient_spikes | isolated actor/grad_norm spikes of 40-160x |
| plateau | plateau | converged | the score rose (0.2 -> 0.65 by 20% of the run), then flat beside a flat held-out |
| | | | score, no total steps logged: issue 51 calls that converged (info), not a plateau warning; rldoctor's |
| | | | own advice for it (stop, roll back to the best step) is the converged entry's "stop it" |
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from playground.diagnose.readers import read_any
from playground.diagnose.sources import diagnose_read

# rldoctor's key -> verl's (None: verl has no key for it, dropped)
VERL_NAMES: dict[str, str | None] = {
    "reward": "critic/score/mean",  # the task score; with the KL as a loss, critic/rewards/mean is the same
    "reward_std": None,  # verl logs no group reward std (PR #5842 is open)
    "frac_reward_zero_std": "critic/advantages/zero_adv_ratio",  # verl PR #5770's name; equal groups: the same share
    "entropy": "actor/entropy",
    "kl": "actor/kl_loss",  # the KL to the reference (beta 0.001: use_kl_loss), not ppo_kl
    "clip_ratio/low_mean": None,  # verl logs one share for both sides of the clip
    "clip_ratio/high_mean": None,
    "clip_ratio/region_mean": "actor/pg_clipfrac",
    "grad_norm": "actor/grad_norm",
    "completions/mean_length": "response_length/mean",
    "completions/clipped_ratio": "response_length/clip_ratio",
    "learning_rate": "actor/lr",
    "step_time": "timing_s/step",
    "perf/throughput": "perf/throughput",
    "rewards/correctness/mean": None,  # reward components: verl logs none by default
    "rewards/format/mean": None,
    "eval/accuracy": "val-core/openai/gsm8k/reward/mean@1",  # a held-out score, as verl's validation names it
}
# the critic/rewards/mean verl logs beside the score (equal to it without a KL penalty in the reward)
ALSO = {"reward": "critic/rewards/mean"}

EXPECTED: dict[str, str | None] = {
    "healthy": None,
    "entropy_collapse": "entropy_collapse",
    "saturated_groups": "no_learning_signal",
    "too_hard": "no_learning_signal",
    "reward_hacking": "reward_hacking",
    "length_hacking": "reward_hacking",
    "truncation": "response_truncation",
    "kl_blowup": "kl_drift",
    "clip_saturation": "lr_too_high",
    "grad_spikes": "gradient_spikes",
    # rise, then flat with no evidence it should still rise (issue 51): converged, an info state; a plateau warning
    # needs a score flat from the start, far below its validation, or early in its schedule
    "plateau": "converged",
}
LEFT_OUT = {"format_domination": "needs reward-component keys verl does not log"}
SEEDS = tuple(range(5))


def verl_record(record: dict) -> dict:
    """One simulated step with verl's names: verl counts steps from 1."""
    data = {}
    for key, value in record.items():
        if key == "step":
            continue
        if (name := VERL_NAMES.get(key)) is not None:
            data[name] = value
        if key in ALSO:
            data[ALSO[key]] = value
    return {"step": int(record["step"]) + 1, "data": data}


def simulated(scenario: str, seed: int, n_steps: int = 400) -> tuple[list[dict], dict]:
    """rldoctor's run for a scenario and seed, as verl file-logger lines, and its config."""
    from rl_doctor.simulate import simulate

    records, config = simulate(scenario, n_steps=n_steps, seed=seed)
    return [verl_record(r) for r in records], config


def diagnose_simulated(scenario: str, seed: int):
    """The engine's report on one simulated run, read back from a verl file-logger JSONL."""
    lines, config = simulated(scenario, seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{scenario}_{seed}.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        read = read_any(path)
        read.source = f"rldoctor:{scenario}:{seed}"
        return diagnose_read(read, max_response_length=int(config["max_response_length"]))


def judge(scenario: str, report) -> dict:
    """Named: the expected id is the root of a diagnosis (a healthy run: no warning at all)."""
    warnings = sorted({f.id for f in report.findings if f.severity != "info"})
    expected = EXPECTED[scenario]
    named = not warnings if expected is None else expected in report.roots()
    return {"scenario": scenario, "expected": expected, "named": named, "roots": report.roots(),
            "warnings": warnings}


def run_suite(seeds=SEEDS) -> list[dict]:
    """Every scenario on every seed: one judgement each."""
    return [{"seed": seed, **judge(scenario, diagnose_simulated(scenario, seed))}
            for scenario in EXPECTED for seed in seeds]


if __name__ == "__main__":
    for row in run_suite():
        print(json.dumps(row))
