"""The calculator tool task: its tokenizer, calculator, episode (parsing, reward, tool calls), SFT traces and their
loss mask, the config checks, and a tiny multi-turn run end to end."""

from __future__ import annotations

import json

import pytest
import torch

from playground.config import ConfigError, compose
from playground.metrics import is_known
from playground.rundir.runs import read_metrics_jsonl
from playground.tasks.calc_data import CalcEpisode, CalcPrompts, calculate, final_answer
from playground.tasks.prompt_sets import PromptSetKeys, check_config
from playground.tasks.sft import sft_loss


def test_tokenizer_keeps_tags_whole():
    tok = CalcPrompts.tokenizer
    ids = tok.encode("<tool>12*3</tool>")
    assert len(ids) == 6 and tok.decode(ids) == "<tool>12*3</tool>" and tok.vocab_size == 22
    with pytest.raises(ValueError):
        tok.encode("1+2")


@pytest.mark.parametrize("expression, value", [("347*291", "100977"), ("7", "7"), ("2*3*4", "24"), ("", "?"),
                                               ("3**4", "?"), ("*3", "?"), ("1" * 13 + "*2", "?")])
def test_calculator(expression, value):
    assert calculate(expression) == value


def test_episode_replies_counts_calls_and_scores_the_final_turn():
    ep = CalcEpisode("100977")
    reply = ep.step("<tool>347*291</tool>")
    assert (reply.text, reply.reward, reply.done) == ("<result>100977</result>", 0.0, False)
    assert ep.step("<answer>1</answer><tool>3*</tool>").text == "<result>?</result>"  # a call it cannot evaluate
    assert ep.step("</tool>").text == "<result>?</result>"  # no opening tag: still a call, answered "?"
    assert ep.outcome("<answer>100977</answer>") == {"score": 1.0, "acc": 1.0, "tool_calls": 3.0}
    fresh = CalcEpisode("12")
    assert fresh.outcome("<answer>13</answer>") == {"score": 0.0, "acc": 0.0, "tool_calls": 0.0}
    assert fresh.outcome("12") == {"score": 0.0, "acc": 0.0, "tool_calls": 0.0}  # no answer tags: no answer
    assert final_answer("<answer>1</answer><answer>2</answer>") == "2" and final_answer("<answer>") is None


def test_traces_use_the_tool_on_their_share_and_mask_its_reply():
    data = CalcPrompts(num_train=200, num_val=10, tool_share=0.3)
    example = data.val[0]
    a, b = example.prompt.rstrip("=").split("*")
    assert example.answer == str(int(a) * int(b))
    assert data.trace(example, use_tool=False) == [("assistant", f"<answer>{example.answer}</answer>")]
    assert data.trace(example, use_tool=True) == [
        ("assistant", f"<tool>{a}*{b}</tool>"), ("env", f"<result>{example.answer}</result>"),
        ("assistant", f"<answer>{example.answer}</answer>")]
    ids, attention, loss = data.collate_sft_targets([example] * 400)
    tok = data.tokenizer
    with_tool = ids[:, 0] == tok.stoi["<tool>"]
    assert 0.25 < with_tool.float().mean() < 0.35  # tool_share 0.3
    row = with_tool.nonzero()[0, 0]
    result = (ids[row] == tok.stoi["<result>"]).nonzero()[0, 0]
    end = (ids[row] == tok.stoi["</result>"]).nonzero()[0, 0]
    assert loss[row, result:end + 1].eq(0).all() and loss[row, :result].eq(1).all()  # the reply is out of the loss
    assert attention[row, :end + 1].eq(1).all() and loss[row].sum() == attention[row].sum() - (end + 1 - result)
    head = (~with_tool).nonzero()[0, 0]
    assert torch.equal(loss[head], attention[head])
    assert data.max_answer_tokens >= attention.sum(-1).max()  # 6 d + 7 tokens + EOS covers the longest trace


def test_sft_loss_trains_the_assistant_tokens_only():
    from playground.models.tiny_gpt import GPTConfig, TinyGPT, compute_log_prob, position_ids_from_mask
    data = CalcPrompts(num_train=50, num_val=5, tool_share=1.0)  # every trace calls the tool: the same each draw
    torch.manual_seed(0)
    model = TinyGPT(GPTConfig(vocab_size=22, block_size=40, n_layer=1, n_head=2, n_embd=16))
    examples = data.train[:4]
    prompt_ids, prompt_mask = data.collate_prompts(examples)
    ids, attention, loss_mask = data.collate_sft_targets(examples)
    mask = torch.cat([prompt_mask, attention], 1)
    log_probs, _ = compute_log_prob(model, torch.cat([prompt_ids, ids], 1), mask, position_ids_from_mask(mask), ids)
    assistant_only = -(log_probs * loss_mask).sum() / loss_mask.sum()
    every_token = -(log_probs * attention).sum() / attention.sum()
    assert loss_mask.sum() == attention.sum() - sum(2 + len(e.answer) for e in examples)  # a reply: 2 tags + product
    torch.testing.assert_close(sft_loss(model, data, examples), assistant_only)
    assert not torch.isclose(assistant_only, every_token)


def _check(overrides: list[str]) -> None:
    check_config(PromptSetKeys.from_config(compose(overrides)))


def test_multi_turn_enable_must_match_the_task():
    _check(["task=calc"])
    with pytest.raises(ConfigError, match=r"multi_turn.enable=False is out of range: allowed true for task.name=calc"):
        _check(["task=calc", "actor_rollout_ref.rollout.multi_turn.enable=false"])
    with pytest.raises(ConfigError, match=r"allowed false for task.name=reverse"):
        _check(["task=reverse", "actor_rollout_ref.rollout.multi_turn.enable=true"])
    with pytest.raises(ConfigError, match=r"reward.format_score=0.1"):
        _check(["task=calc", "reward.format_score=0.1"])


TINY_CALC = ["task=calc", "task.num_val=16", "sft.max_steps=40", "sft.eval_every=40", "sft.batch_size=16",
             "data.train_batch_size=4", "actor_rollout_ref.rollout.n=4",
             "actor_rollout_ref.actor.ppo_mini_batch_size=4", "trainer.total_training_steps=2", "trainer.test_freq=2",
             "actor_rollout_ref.model.n_embd=32"]


def test_a_tiny_multi_turn_run_logs_its_episodes(train_run):
    _, run_dir = train_run(TINY_CALC)
    records = read_metrics_jsonl(run_dir / "metrics.jsonl").records
    step = records[1]
    for key in ("training/num_turns/mean", "tool_call_counts/max", "episode/reward/mean", "episode/length/max",
                "episode/success_rate_calc", "train/group_reward_std/mean"):
        assert key in step, key
    assert all(is_known(k) for r in records for k in r)
    assert step["training/num_turns/mean"] == pytest.approx(1 + step["episode/length/mean"]
                                                            + step["tool_call_counts/mean"], abs=1e-5)
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    for sample in samples:  # the turns, in order, make up the whole response
        assert "".join(t["text"] for t in sample["turns"]) == sample["response"]
        assert sample["num_turns"] == 1 + len(sample["turns"])
    assert any(t["role"] == "env" for s in samples for t in s["turns"])  # the base calls its tool


def test_turn_rewards_sit_on_their_turn_end_tokens_and_the_outcome_on_the_last_assistant_token():
    from playground.run_spec import resolve_run
    from playground.tasks.agent_loop import episode_fields
    from playground.tasks.token_reward import TokenReward
    from tests.models.test_multi_turn import END, FakeEpisode, run

    x = 4
    script = [[5, END, x, x, 6, 2, 3, 3, 3, 3]]  # "2=" -> env "77" (reward 0.5) -> "3" EOS
    _, traces = run(script, [FakeEpisode([("77", False)])])
    batch = episode_fields(traces, 1, 10, torch.device("cpu"))
    out, _ = run(script, [FakeEpisode([("77", False)])])
    cfg = compose(["task=calc", "reward.scale=2.0"])
    batch.update(agents=[0], response_mask=out.response_mask[None].float(), response_length=out.response_length[None])
    spec = resolve_run([cfg], torch.device("cpu")).task
    TokenReward(spec.reward, spec.max_response_length, torch.device("cpu")).score_batch(batch, [torch.Generator()])
    # FakeEpisode's outcome score is its number of steps (1.0): on token 5 (the EOS), the reply's 0.5 on token 1
    assert batch["scores"][0, 0].tolist() == [0, 0.5, 0, 0, 0, 1.0, 0, 0, 0, 0]
    assert batch["token_level_scores"][0, 0].tolist() == [0, 1.0, 0, 0, 0, 2.0, 0, 0, 0, 0]  # × reward.scale
