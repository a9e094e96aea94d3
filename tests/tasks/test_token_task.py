"""Token runs end to end: the batch, the sequence metrics, validation, samples, truncation, PPO and GRPO."""

import json

import pytest

from playground.metrics import STEP, is_known
from playground.rundir.runs import read_metrics_jsonl, read_run_info

SHORT = ["task=reverse", "trainer.total_training_steps=3", "trainer.test_freq=3"]


def _records(run_dir):
    return read_metrics_jsonl(run_dir / "metrics.jsonl").records


def test_grpo_run_writes_every_sequence_metric(train_run):
    trainer, run_dir = train_run(SHORT)
    records = _records(run_dir)
    info = read_run_info(run_dir)
    assert [r[STEP] for r in records] == [0, 1, 2, 3]
    assert set(records[0]) == {STEP, "val/score", "val/accuracy", "val/pass@1"}  # verl's val_before_train line
    assert records[0]["val/accuracy"] == info["base_val_accuracy"]  # RL starts from the SFT base
    assert 0.2 <= info["base_val_accuracy"] <= 0.6 and info["max_entropy"] > 2.5
    step = records[1]
    for key in ("response_length/mean", "response_length/clip_ratio", "prompt_length/max", "critic/score/mean",
                "critic/rewards/std", "actor/kl_loss", "actor/kl_coef", "actor/ppo_kl", "timing_per_token_ms/gen",
                "perf/mfu/actor", "perf/throughput", "training/epoch", "critic/advantages/max",
                "critic/advantages/zero_adv_ratio", "train/zero_adv_group_ratio"):
        assert key in step, key
    # with GRPO's 0/1 rewards a response has advantage 0 exactly when its whole group scored alike
    assert step["critic/advantages/zero_adv_ratio"] == step["train/zero_adv_group_ratio"]
    assert step["training/num_turns/mean"] == step["training/num_turns/max"] == 2.0  # V1's count of one reply
    # 7-token prompts in a width of 8: none is cut, so none counts as clipped (verl: length == padded width)
    assert step["prompt_length/max"] == 7 and step["prompt_length/clip_ratio"] == 0.0
    assert step["response_length/max"] <= 8 and 0 < step["perf/mfu/actor"] < 1
    assert "critic/values/mean" not in step  # GRPO has no critic
    assert "val/accuracy" in records[3]
    assert all(is_known(k) for r in records for k in r)
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 12 and {s["step"] for s in samples} == {1, 2, 3}
    assert set(samples[0]) >= {"prompt", "response", "reward", "truncated", "answer"}


def test_ppo_with_a_critic(train_run):
    _, run_dir = train_run([*SHORT, "algorithm.adv_estimator=gae"])
    step = _records(run_dir)[2]
    assert {"critic/vf_loss", "critic/vf_explained_var", "critic/values/mean", "critic/vpred_mean"} <= set(step)


def test_truncation_is_counted(train_run):
    _, run_dir = train_run([*SHORT, "data.max_response_length=3", "data.max_prompt_length=5"])
    step = _records(run_dir)[1]
    assert step["response_length/clip_ratio"] > 0.8 and step["response_length/max"] == 3
    assert step["prompt_length/clip_ratio"] == 1.0 and step["prompt_length/max"] == 5


def test_pass_at_k_with_sampled_validation(train_run):
    val_kwargs = "actor_rollout_ref.rollout.val_kwargs"
    _, run_dir = train_run(["task=reverse", "trainer.total_training_steps=1", "trainer.test_freq=1",
                            f"{val_kwargs}.n=4", f"{val_kwargs}.do_sample=true", f"{val_kwargs}.temperature=1.0"])
    val = _records(run_dir)[0]
    passes = [val[f"val/pass@{k}"] for k in (1, 2, 3, 4)]
    assert passes == sorted(passes) and passes[0] == val["val/accuracy"]


@pytest.mark.parametrize("estimator", ["grpo", "gae"])
def test_healthy_reverse_lifts_accuracy(estimator, train_run):
    # the shortened CI version of the done-criterion: GRPO, and PPO with a critic, from the base to >= 0.9
    _, run_dir = train_run(["task=reverse", f"algorithm.adv_estimator={estimator}",
                            "trainer.total_training_steps=60", "trainer.stop_on_score=0.9"])
    records = _records(run_dir)
    info = read_run_info(run_dir)
    assert records[-1]["val/accuracy"] >= 0.9 > records[0]["val/accuracy"], info
    assert info["stop_reason"].startswith("stop_on_score")


# CI keeps GRPO (verl's LLM default); PPO with a critic on addition runs with the slow tests
@pytest.mark.parametrize("estimator", ["grpo", pytest.param("gae", marks=pytest.mark.slow)])
def test_healthy_addition_lifts_accuracy_clearly_above_the_base(estimator, train_run):
    # from the 0.309 base (torch 2.13's SFT), the better of the last two validations at step 40 measured
    # 0.39-0.43 with GRPO (seeds 0-3) and 0.40-0.44 with GAE (seeds 1-3): +0.07 at the least; one validation
    # alone swings by ~0.03 (512 prompts, greedy), so the test reads two
    _, run_dir = train_run(["task=addition", f"algorithm.adv_estimator={estimator}",
                            "trainer.total_training_steps=40"])
    accuracy = [r["val/accuracy"] for r in _records(run_dir) if "val/accuracy" in r]
    assert max(accuracy[-2:]) >= accuracy[0] + 0.06, accuracy


def test_rloo_and_every_loss_agg_mode_run_through_the_shared_update(train_run):
    for mode in ("seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"):
        _, run_dir = train_run(["task=reverse", "trainer.total_training_steps=1", "trainer.test_freq=-1",
                                "trainer.val_before_train=false", "algorithm.adv_estimator=rloo",
                                f"actor_rollout_ref.actor.loss_agg_mode={mode}"])
        step = _records(run_dir)[0]
        assert step["actor/pg_loss"] == step["actor/pg_loss"] and "critic/vf_loss" not in step  # finite, no critic


def test_an_agents_rollouts_do_not_depend_on_who_shares_the_batch():
    """Each agent's prompts and samples come from its own generators: alone, in a batch of three, or rolled out by
    itself from that batch (`generate(agents)`, as dynamic sampling would ask for more rows), it gets the same rows."""
    import torch

    from playground.config import compose
    from playground.train import build_task_for

    cfgs = [compose(["task=reverse", "+debug=tiny", f"trainer.seed={seed}", f"reward.scale={seed}"])
            for seed in (1, 2, 3)]
    cpu = torch.device("cpu")

    def task(agent_cfgs):
        return build_task_for(agent_cfgs, cpu)

    alone, batch, again = task(cfgs[1:2]), task(cfgs), task(cfgs)
    full = batch.generate()
    for step in range(2):
        own = alone.generate()
        part = again.generate(agents=[1])
        for rows in (part, full) if step == 0 else (part,):
            k = 1 if rows is full else 0
            assert torch.equal(rows["responses"][k], own["responses"][0])
            assert rows["prompt_text"][k] == own["prompt_text"][0]
        alone.compute_scores(own)
        again.compute_scores(part)
        assert torch.equal(part["token_level_scores"], own["token_level_scores"])  # agent 1's reward.scale
        assert own["token_level_scores"].max() in (0.0, 2.0)
