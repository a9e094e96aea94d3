"""The step's per-token records (`playground/step/token_records.py`, `tokens.jsonl`): PPO's per-token terms against
hand-computed values, and a step's actor metrics recomputed from the records of a run that records every response."""

from __future__ import annotations

import math
from collections import defaultdict

import pytest
import torch

from playground.algos.aggregate import agg_loss
from playground.algos.losses import ppo_clip_terms
from playground.config import ConfigError, compose, validate
from playground.metrics import STEP
from playground.rundir.runs import read_metrics_jsonl, read_run_info, read_token_records
from playground.step.token_records import _pick

RECORDS = ["trainer.token_records.enable=true", "trainer.logger=[]", "trainer.progress_bar=false"]
LR_TOO_HIGH = ["task=reverse", "scenario=lr_too_high", "trainer.total_training_steps=3"]


def test_ppo_clip_terms_by_hand():
    """ε = 0.2, c = 3. Token 1: A = 1, r = 1.5 -> the clipped term binds (L2 = -1.2 > L1 = -1.5). Token 2: A = -1,
    r = 0.5 -> binds (L2 = 0.8 > L1 = 0.5). Token 3: A = -1, r = 4 -> L1 = 4 > L2 = 1.2, the dual clip binds
    (max = 4 > c·(-A) = 3). Token 4: A = 1, r = 1.1 inside the band: nothing binds."""
    ratio = torch.tensor([1.5, 0.5, 4.0, 1.1])
    adv = torch.tensor([1.0, -1.0, -1.0, 1.0])
    terms = ppo_clip_terms(torch.zeros(4), ratio.log(), adv, 0.2, 0.2, 3.0)
    assert terms["clipped"].tolist() == [True, True, False, False]
    assert terms["clipped_lower"].tolist() == [False, False, True, False]
    assert torch.allclose(terms["ratio"], ratio)
    assert torch.allclose(terms["losses"], torch.tensor([-1.2, 0.8, 3.0, -1.1]))


def _recompute(records: list[dict], loss_agg_mode: str = "token-mean") -> dict[str, float]:
    """A step's actor metrics from its records, as the update computes them: per micro-batch a masked mean over its
    tokens, then the mean over micro-batches (verl's `append_to_dict` + mean); the entropy aggregated as the loss
    aggregates it over every response."""
    micro: dict[int, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        for u in r["updates"]:
            m = micro[u["micro"]]
            m["mask"].append(r["mask"])
            for key in ("clipped", "clipped_lower", "log_ratio"):
                m[key].append(u[key])

    def masked_mean(rows: list[list[float]], masks: list[list[int]]) -> float:
        num = sum(v * w for row, mask in zip(rows, masks) for v, w in zip(row, mask))
        return num / max(sum(sum(mask) for mask in masks), 1)

    out = {}
    for name, key, sign in (("actor/pg_clipfrac", "clipped", 1), ("actor/pg_clipfrac_lower", "clipped_lower", 1),
                            ("actor/ppo_kl", "log_ratio", -1)):
        per_micro = [sign * masked_mean(m[key], m["mask"]) for m in micro.values()]
        out[name] = sum(per_micro) / len(per_micro)
    width = max(len(r["mask"]) for r in records)
    pad = lambda rows: torch.tensor([row + [0] * (width - len(row)) for row in rows], dtype=torch.float64)  # noqa: E731
    out["actor/entropy"] = float(agg_loss(pad([r["entropy"] for r in records]), pad([r["mask"] for r in records]),
                                          loss_agg_mode))
    return out


def test_a_steps_clipfrac_ppo_kl_and_entropy_come_back_from_its_token_records(train_run):
    """reverse lr_too_high (PPO with a critic, two mini-batches a step): every response recorded, each step's
    `actor/pg_clipfrac`, `actor/ppo_kl` and `actor/entropy` recomputed from the file alone."""
    _, run_dir = train_run([*LR_TOO_HIGH, *RECORDS, "trainer.token_records.responses_per_step=-1"])
    metrics = {int(r[STEP]): r for r in read_metrics_jsonl(run_dir / "metrics.jsonl").records}
    records, problems = read_token_records(run_dir)
    assert not problems and {r["step"] for r in records} == {1, 2, 3}
    clipped_somewhere = False
    for step in (1, 2, 3):
        rows = [r for r in records if r["step"] == step]
        assert sorted(r["row"] for r in rows) == list(range(len(rows))) and len(rows) == 128  # 32 prompts × 4
        assert {len(r["updates"]) for r in rows} == {1}  # one epoch: each response in one micro-batch
        recomputed = _recompute(rows)
        for key, value in recomputed.items():
            assert math.isclose(value, metrics[step][key], rel_tol=1e-5, abs_tol=1e-7), (step, key)
        clipped_somewhere |= recomputed["actor/pg_clipfrac"] > 0
    assert clipped_somewhere  # the scenario's clip binds: the inspector has clipped tokens to show


def test_a_few_records_a_step_hold_both_ends_of_the_advantage_range(train_run):
    _, run_dir = train_run([*LR_TOO_HIGH, "trainer.total_training_steps=2", *RECORDS,
                            "trainer.token_records.responses_per_step=6"])
    everything, _ = read_token_records(run_dir)
    for step in (1, 2):
        rows = [r for r in everything if r["step"] == step]
        assert len(rows) == 6
        means = [sum(a * m for a, m in zip(r["advantages"], r["mask"])) / max(sum(r["mask"]), 1) for r in rows]
        assert max(means) > 0 > min(means)  # GAE: the best and the worst response of the step are both there
        for r in rows:
            assert len(r["tokens"]) == len(r["mask"]) == len(r["advantages"]) == len(r["old_log_prob"])
            assert r["row"] in r["group"]["rows"] and len(r["group"]["rewards"]) == 4  # rollout.n = 4


def test_pick_takes_each_signals_extremes_then_whole_groups():
    uid = [0, 0, 1, 1, 2, 2]
    rewards = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    adv = [0.5, -0.5, 0.0, 0.0, -0.1, 0.9]
    clipped = [0, 0, 0, 3, 0, 0]
    assert _pick(3, uid, rewards, {"advantage": adv, "clipped": clipped}) == [1, 3, 5]  # max, min, the clipped one
    assert _pick(5, uid, rewards, {"advantage": adv, "clipped": clipped}) == [1, 2, 3, 4, 5]  # + 5's group, alike
    assert _pick(-1, uid, rewards, {"advantage": adv}) == list(range(6))


def test_records_stop_at_max_mb_and_run_json_says_where(train_run):
    _, run_dir = train_run([*LR_TOO_HIGH, *RECORDS, "trainer.token_records.responses_per_step=-1",
                            "trainer.token_records.max_mb=0.1"])
    records, _ = read_token_records(run_dir)
    assert {r["step"] for r in records} == {1}  # one step's 128 responses already pass 0.1 MB
    assert read_run_info(run_dir)["token_records_full_at"] == 2


def test_records_off_write_no_file_and_a_gym_task_refuses_them(train_run):
    _, run_dir = train_run([*LR_TOO_HIGH, "trainer.total_training_steps=1", "trainer.logger=[]",
                            "trainer.token_records.enable=false"])  # a token task's file turns them on
    assert read_token_records(run_dir) == ([], []) and not (run_dir / "tokens.jsonl").exists()
    with pytest.raises(ConfigError, match="trainer.token_records.enable=True is out of range for gym tasks"):
        validate(compose(["task=cartpole", "trainer.token_records.enable=true"]))


def test_a_multi_turn_records_masks_the_environments_tokens(train_run):
    """calc: the tool's replies sit inside the response but the loss does not train on them (mask 0)."""
    _, run_dir = train_run(["task=calc", "trainer.total_training_steps=1", *RECORDS,
                            "trainer.token_records.responses_per_step=-1"])
    records, _ = read_token_records(run_dir)
    replies = [r for r in records if 0 in r["mask"]]
    assert replies, "the base calls its tool on some prompts"
    r = replies[0]
    reply = "".join(t for t, m in zip(r["tokens"], r["mask"]) if not m)
    assert reply.startswith("<result>"), reply
