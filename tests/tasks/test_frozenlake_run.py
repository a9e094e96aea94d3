"""FrozenLake on the trainer: its config, the SFT loss on the actions only, and a tiny run whose episodes replay."""

from __future__ import annotations

import json

import pytest
import torch

from playground.config import compose, validate
from playground.metrics import is_known
from playground.models.tiny_gpt import GPTConfig, TinyGPT, compute_log_prob, position_ids_from_mask
from playground.rundir.runs import read_metrics_jsonl
from playground.tasks.frozenlake import ACTION_NAMES
from playground.tasks.frozenlake_data import FrozenLakePrompts
from playground.tasks.prompt_sets import PromptSetKeys, check_config, prompts_for_task
from playground.tasks.sft import sft_loss


def test_the_task_file_composes_and_validates():
    cfg = compose(["task=frozenlake"])
    validate(cfg)
    check_config(PromptSetKeys.from_config(cfg))
    data = prompts_for_task(cfg.task)
    assert isinstance(data, FrozenLakePrompts) and data.max_steps == cfg.task.max_steps
    # the prompt fits with a spare token; every turn's reply fits but the 10th (nothing follows it)
    assert cfg.data.max_prompt_length > data.max_prompt_tokens
    assert cfg.data.max_response_length == data.max_answer_tokens
    assert cfg.actor_rollout_ref.model.block_size >= cfg.data.max_prompt_length + cfg.data.max_response_length


def test_sft_loss_trains_on_the_actions_only():
    data = FrozenLakePrompts(num_train=20, num_val=4)
    torch.manual_seed(0)
    model = TinyGPT(GPTConfig(vocab_size=data.tokenizer.vocab_size, block_size=240, n_layer=1, n_head=2, n_embd=16))
    examples = data.train[:6]
    state = data._trace_rng.getstate()
    prompt_ids, prompt_mask = data.collate_prompts(examples)
    ids, attention, loss_mask = data.collate_sft_targets(examples)
    data._trace_rng.setstate(state)  # sft_loss draws the same traces again
    mask = torch.cat([prompt_mask, attention], 1)
    log_probs, _ = compute_log_prob(model, torch.cat([prompt_ids, ids], 1), mask, position_ids_from_mask(mask), ids)
    actions_only = -(log_probs * loss_mask).sum() / loss_mask.sum()
    torch.testing.assert_close(sft_loss(model, data, examples), actions_only)
    assert loss_mask.sum() * 21 == attention.sum()  # one action per 21 tokens, the board's 20 out of the loss


TINY = ["task=frozenlake", "task.num_val=8", "sft.max_steps=4", "sft.eval_every=4", "sft.target_acc_lo=0",
        "data.train_batch_size=2", "actor_rollout_ref.rollout.n=4", "actor_rollout_ref.actor.ppo_mini_batch_size=2",
        "actor_rollout_ref.rollout.val_kwargs.n=1", "trainer.total_training_steps=2", "trainer.test_freq=2",
        "actor_rollout_ref.model.n_embd=16", "actor_rollout_ref.model.n_layer=1",
        # 3 turns a game: a response of 63 tokens (3 x 21), the model's positions 22 + 63
        "task.max_steps=3", "data.max_response_length=63", "actor_rollout_ref.model.block_size=85"]


def test_a_tiny_run_logs_episodes_that_replay(train_run):
    _, run_dir = train_run(TINY)
    records = read_metrics_jsonl(run_dir / "metrics.jsonl").records
    step = records[1]
    for key in ("training/num_turns/mean", "episode/length/max", "episode/reward/min",
                "episode/success_rate_frozenlake", "train/group_reward_std/mean"):
        assert key in step, key
    assert all(is_known(k) for r in records for k in r)
    data = FrozenLakePrompts(num_train=10, num_val=2)  # only its episodes are used: the map comes from the sample
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert samples
    for sample in samples:
        turns = sample["turns"]
        assert "".join(t["text"] for t in turns) == sample["response"]
        assert [t["role"] for t in turns[:2]] == ["assistant", "env"][:len(turns[:2])]
        # every reply is a 4x4 board; replaying the assistant's turns on the map gives the same replies and reward
        episode = data.new_episode(type("Ex", (), {"answer": sample["answer"]})())
        last = ""
        for i, turn in enumerate(turns):
            if turn["role"] == "env":
                continue
            following = turns[i + 1] if i + 1 < len(turns) else None
            if following is None or following["role"] != "env":
                last = turn["text"]
                break
            assert episode.step(turn["text"]).text == following["text"]
            assert len(following["text"]) == 20 and following["text"].count("\n") == 4
        assert episode.outcome(last)["score"] == pytest.approx(sample["reward"], abs=1e-6)
    assert any(t["text"] in ACTION_NAMES for s in samples for t in s["turns"])  # the base moves
