"""verl's keys mean here what they mean in verl: the clip_ratio trap, deprecated spellings, keys that act only on token
tasks, and each policy loss and advantage estimator of the modern ladder training through the shared trainer."""

from __future__ import annotations

import pytest
import torch

from playground.config import ConfigError, compose, resolve_deprecated, validate
from playground.rundir.runs import read_metrics_jsonl

A = "actor_rollout_ref.actor"
HOT = ["task=cartpole", "trainer.total_training_steps=3", "env.num_envs=8", "env.rollout_length=16",
       f"{A}.optim.lr=2e-2", f"{A}.ppo_mini_batch_size=32", f"{A}.ppo_epochs=4"]  # a step large enough to clip
TINY_TOKEN = ["task=reverse", "+debug=tiny", "trainer.total_training_steps=2"]


def _clipfrac(run_dir) -> list[float]:
    return [r["actor/pg_clipfrac"] for r in read_metrics_jsonl(run_dir / "metrics.jsonl").records]


def test_the_clip_ratio_trap(train_run):
    """As in verl, clip_ratio_low/high default to 0.2 and win: the guide's `clip_ratio=0.3` alone changes nothing."""
    base = _clipfrac(train_run(HOT)[1])
    assert max(base) > 0  # the clip binds in this run
    assert _clipfrac(train_run([*HOT, f"{A}.clip_ratio=0.3"])[1]) == base
    wider = _clipfrac(train_run([*HOT, f"{A}.clip_ratio_high=0.3"])[1])
    assert wider != base and sum(wider) < sum(base)
    assert _clipfrac(train_run([*HOT, f"{A}.clip_ratio=0.3", f"{A}.clip_ratio_low=null",
                                f"{A}.clip_ratio_high=null"])[1]) != base  # null falls back to clip_ratio, as verl


def test_warmup_style_is_read_as_lr_scheduler_type_with_a_note():
    cfg = compose(["task=cartpole", f"{A}.optim.warmup_style=cosine"])
    assert resolve_deprecated(cfg) == [f"{A}.optim.warmup_style is deprecated in verl: read as "
                                       f"{A}.optim.lr_scheduler_type=cosine"]
    assert cfg.actor_rollout_ref.actor.optim.lr_scheduler_type == "cosine"
    with pytest.raises(ConfigError, match="warmup_style='linear' is out of range"):
        validate(compose(["task=cartpole", f"{A}.optim.warmup_style=linear"]))


@pytest.mark.parametrize("key", ["actor_rollout_ref.model.enable_gradient_checkpointing=true",
                                 "critic.model.enable_gradient_checkpointing=true",
                                 "algorithm.filter_groups.enable=true", "reward_model.overlong_buffer.enable=true"])
def test_token_only_keys_are_refused_on_gym_tasks_not_ignored(key):
    with pytest.raises(ConfigError, match="applies to token tasks"):
        validate(compose(["task=cartpole", key]))


@pytest.mark.parametrize("override, message", [
    (f"{A}.policy_loss.clip_cov_ratio=0", "clip_cov_ratio=0 is out of range: allowed in (0, 1]"),
    (f"{A}.policy_loss.clip_cov_ub=0.5", "clip_cov_ub=0.5 is out of range: allowed > clip_cov_lb (1.0)"),
    (f"{A}.ppo_max_token_len_per_gpu=0", "ppo_max_token_len_per_gpu=0 is out of range: allowed an integer >= 1"),
    ("algorithm.filter_groups.metric=loss", "filter_groups.metric='loss' is out of range"),
    ("reward_model.overlong_buffer.len=8", "overlong_buffer.len=8 is out of range: allowed an integer in [1, "),
])
def test_the_ladders_keys_are_validated(override, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        validate(compose(["task=reverse", override]))


LOSS_KNOBS = {"clip_cov": [f"{A}.policy_loss.clip_cov_ratio=0.2", f"{A}.policy_loss.clip_cov_lb=-100",
                            f"{A}.policy_loss.clip_cov_ub=100"],
              "kl_cov": [f"{A}.policy_loss.kl_cov_ratio=0.2", f"{A}.policy_loss.ppo_kl_coef=1.0"]}


@pytest.mark.parametrize("loss_mode", ["gspo", "gpg", "clip_cov", "kl_cov", "geo_mean"])
def test_each_policy_loss_trains_and_changes_the_update(train_run, loss_mode):
    off_policy = [*TINY_TOKEN, f"{A}.ppo_epochs=2"]  # a second epoch: the ratio leaves 1, the losses part ways
    vanilla = read_metrics_jsonl(train_run(off_policy)[1] / "metrics.jsonl").records
    overrides = [*off_policy, f"{A}.policy_loss.loss_mode={loss_mode}", *LOSS_KNOBS.get(loss_mode, [])]
    other = read_metrics_jsonl(train_run(overrides)[1] / "metrics.jsonl").records
    assert [r["training/global_step"] for r in other] == [0.0, 1.0, 2.0]
    assert other[-1]["actor/loss"] != vanilla[-1]["actor/loss"]
    assert other[-1]["actor/grad_norm"] == other[-1]["actor/grad_norm"]  # finite
    if loss_mode == "clip_cov":
        assert other[-1]["actor/pg_clipfrac"] > 0  # the share of tokens Clip-Cov cut


@pytest.mark.parametrize("estimator", ["reinforce_plus_plus_baseline", "opo", "gpg", "grpo_passk", "remax"])
def test_each_advantage_estimator_trains(train_run, estimator):
    records = read_metrics_jsonl(train_run([*TINY_TOKEN, f"algorithm.adv_estimator={estimator}"])[1]
                                 / "metrics.jsonl").records
    assert len(records) == 3 and "critic/advantages/max" in records[-1]


def test_remax_baselines_are_each_prompts_greedy_reward():
    """verl's gen_max phase: one greedy response per prompt, its reward repeated over the prompt's rollout.n rows."""
    from playground.train import build_task_for

    cfg = compose([*TINY_TOKEN, "algorithm.adv_estimator=remax"])
    validate(cfg)
    task = build_task_for([cfg], torch.device("cpu"))
    batch = task.generate()
    baselines, n = batch["reward_baselines"], int(cfg.actor_rollout_ref.rollout.n)
    assert baselines.shape == batch["uid"].shape
    assert torch.equal(baselines.view(1, -1, n), baselines.view(1, -1, n)[..., :1].expand(-1, -1, n))
    assert set(baselines.unique().tolist()) <= {0.0, 1.0}  # the rule reward of the greedy answer (scale 1)


def test_nan_rewards_end_a_token_run_as_a_training_crash(train_run):
    _, run_dir = train_run([*TINY_TOKEN, "trainer.total_training_steps=6", "reward.nan_rate=0.5"])
    from playground.rundir.runs import read_findings, read_run_info

    assert read_run_info(run_dir)["status"] == "diverged"
    assert read_findings(run_dir)["diagnoses"][0]["root"]["id"] == "training_crash"


# ---- gradient checkpointing -------------------------------------------------------------------------------------
CHECKPOINTING = ["actor_rollout_ref.model.enable_gradient_checkpointing=true"]
VOLATILE = ("timing_s/", "timing_per_token_ms/", "perf/")


def _stable_records(run_dir) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith(VOLATILE)}
            for r in read_metrics_jsonl(run_dir / "metrics.jsonl").records]


@pytest.mark.parametrize("agents", [1, 2])
def test_gradient_checkpointing_changes_no_metric(tmp_path, agents):
    """Actor and critic (PPO) recompute their blocks in backward: every metric as without it, alone and for K = 2
    agents trained as one batch (a stacked model)."""
    from playground.batched import train_batch

    runs = {}
    for name, extra in (("plain", []), ("checkpointed", CHECKPOINTING)):
        overrides = [[*TINY_TOKEN, "trainer.logger=[]", "algorithm.adv_estimator=gae", *extra, f"trainer.seed={s}"]
                     for s in range(1, agents + 1)]
        dirs = [tmp_path / name / str(k) for k in range(agents)]
        assert train_batch([compose(o) for o in overrides], dirs, overrides) == ["finished"] * agents
        runs[name] = [_stable_records(d) for d in dirs]
    assert runs["checkpointed"] == runs["plain"]
    assert "critic/vf_loss" in runs["plain"][0][1]


# One update over a micro-batch of 1,024 sequences (the out_of_memory scenario's), capped far above its need so that
# the guard measures (in a process of its own) and the run finishes.
BIG_MICRO_BATCH = ["task=reverse", "scenario=out_of_memory", "trainer.memory_limit_gb=4",
                   "trainer.total_training_steps=1", "trainer.val_before_train=false", "trainer.test_freq=-1"]


def _peak_gb(run_dir) -> float:
    records = read_metrics_jsonl(run_dir / "metrics.jsonl").records
    return max(r.get("perf/max_memory_allocated_gb", 0.0) for r in records)


@pytest.mark.slow  # CI keeps the consequence: checkpointing clears the out_of_memory scenario (the test below)
def test_gradient_checkpointing_lowers_the_updates_peak_memory(train_run):
    """The guard measures a checkpointed backward where it peaks (a block recomputed); without checkpointing it
    measures before backward, a lower bound of that run's peak. Measured: 0.155 GiB against 0.090 GiB."""
    plain, checkpointed = (_peak_gb(train_run([*BIG_MICRO_BATCH, *extra])[1]) for extra in ([], CHECKPOINTING))
    assert checkpointed < 0.75 * plain, (plain, checkpointed)


@pytest.mark.parametrize("steps", [pytest.param(3), pytest.param(None, marks=pytest.mark.slow)])
def test_gradient_checkpointing_clears_the_out_of_memory_scenario(train_run, steps):
    from playground.rundir.runs import read_findings, read_run_info

    shorter = [] if steps is None else [f"trainer.total_training_steps={steps}", "trainer.val_before_train=false"]
    _, run_dir = train_run(["task=reverse", "scenario=out_of_memory", *shorter, *CHECKPOINTING])
    assert read_run_info(run_dir)["status"] == "finished"
    assert "out_of_memory" not in [f["id"] for f in read_findings(run_dir)["findings"]]


# ---- overlong reward shaping and the sequence metrics ------------------------------------------------------------
def _task(overrides: list[str]):
    from playground.train import build_task_for

    cfgs = [compose(o) for o in overrides]
    for cfg in cfgs:
        validate(cfg)
    cpu = torch.device("cpu")
    return build_task_for(cfgs, cpu)


OVERLONG = ["reward_model.overlong_buffer.enable=true", "reward_model.overlong_buffer.len=4",
            "reward_model.overlong_buffer.penalty_factor=0.5", "reward_model.overlong_buffer.log=true"]


def test_overlong_shaping_penalises_the_last_tokens_before_the_limit_as_verls_dapo_reward_manager():
    """max_response_length 8, buffer 4, factor 0.5: expected_len 4, penalty min(-(L - 4) / 4 * 0.5, 0), added to
    the rule score on the last valid token; `acc` and the rule's `score` stay as they were (verl's extra info)."""
    task = _task([[*TINY_TOKEN, "trainer.seed=2", *OVERLONG]])
    batch = task.generate()
    task.compute_scores(batch)
    by_length = {1: 0.0, 2: 0.0, 3: 0.0, 4: 0.0, 5: -0.125, 6: -0.25, 7: -0.375, 8: -0.5}  # by hand
    length = batch["response_length"][0]
    info = batch["reward_extra_info"]
    expected = info["score"][0] + torch.tensor([by_length[int(n)] for n in length])
    assert torch.equal(batch["scores"][0].sum(-1), expected)
    assert torch.equal(batch["token_level_scores"], batch["scores"])  # reward.scale 1, no noise
    last = batch["scores"][0][torch.arange(len(length)), length - 1]
    assert torch.equal(last, expected)  # on the last valid token
    assert torch.equal(info["overlong_reward"][0], expected - info["score"][0])
    assert torch.equal(info["overlong"][0], (length > 4).float())
    assert set(length.tolist()) >= {1, 5, 6, 7, 8} and info["acc"][0].max() == 1  # right answers, long and cut ones


def test_overlong_log_needs_the_shaping_on():
    with pytest.raises(ConfigError, match="overlong_buffer.log=True is out of range"):
        validate(compose([*TINY_TOKEN, "reward_model.overlong_buffer.log=true"]))


def test_overlong_log_writes_each_samples_penalty(train_run):
    import json

    _, run_dir = train_run([*TINY_TOKEN, *OVERLONG])
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert all(s["overlong"] == (s["overlong_reward"] < 0) for s in samples)
    assert {s["overlong_reward"] for s in samples} <= {0.0, -0.125, -0.25, -0.375, -0.5}


def test_the_sequence_metrics_on_a_hand_made_batch():
    """verl's compute_data_metrics (aborted = no response token) and _balance_batch on one rank, for 2 agents."""
    task = _task([[*TINY_TOKEN, f"trainer.seed={s}"] for s in (1, 2)])
    n, R = 4, 8  # rollout.n, max_response_length; 2 prompts per agent
    length = torch.tensor([[0, 3, 8, 5, 2, 2, 8, 8], [1, 1, 1, 1, 4, 4, 4, 4]])
    rewards = torch.tensor([[0., 1., 0., 1., 0., 0., 0., 0.], [1., 1., 1., 1., 0., 0., 1., 0.]])
    response_mask = (torch.arange(R) < length[..., None]).float()
    prompt_mask = torch.ones(2, 8, 7)  # 7-token prompts
    level = torch.zeros(2, 8, R)
    level[..., 0] = rewards
    batch = {"response_length": length, "prompt_length": prompt_mask.sum(-1).long(), "response_mask": response_mask,
             "attention_mask": torch.cat([prompt_mask, response_mask], -1), "scores": level,
             "token_level_rewards": level, "uid": torch.arange(2).repeat_interleave(n).expand(2, -1),
             "reward_extra_info": {"acc": rewards}}
    m = task.batch_metrics(batch)
    assert m["response/aborted_ratio"].tolist() == [1 / 8, 0.0]
    assert m["response_length/mean"].tolist() == [36 / 8, 20 / 8]
    assert m["response_length_non_aborted/mean"].tolist() == pytest.approx([36 / 7, 20 / 8])
    assert m["response_length_non_aborted/min"].tolist() == [2, 1] and m["response_length/min"].tolist() == [0, 1]
    assert m["response_length_non_aborted/clip_ratio"].tolist() == pytest.approx([3 / 7, 0.0])
    assert m["response_length/clip_ratio"].tolist() == [3 / 8, 0.0]
    tokens = [8 * 7 + 36, 8 * 7 + 20]
    for stat in ("min", "max", "balanced_min", "balanced_max", "mean"):
        assert m[f"global_seqlen/{stat}"].tolist() == tokens, stat
    assert m["global_seqlen/minmax_diff"].tolist() == [0, 0]
    # agent 0: group 0 mixed, group 1 all 0; agent 1: group 0 all 1, group 1 mixed
    assert m["train/zero_adv_group_ratio"].tolist() == [0.5, 0.5]
    assert m["critic/score/mean"].tolist() == pytest.approx([2 / 7, 5 / 8])  # aborted rows left out, as verl
    # the split by the reward's acc (verl's forks): an aborted response is a wrong one
    assert m["response_length/correct/mean"].tolist() == pytest.approx([4.0, 8 / 5])
    assert m["response_length/incorrect/mean"].tolist() == pytest.approx([28 / 6, 4.0])
    assert m["response_length/incorrect/clip_ratio"].tolist() == pytest.approx([0.5, 0.0])


def test_a_step_without_right_answers_has_no_right_answers_length():
    from playground.tasks.token_task import length_by_correctness

    m = length_by_correctness(torch.tensor([[3, 8], [2, 5]]), torch.tensor([[0., 0.], [1., 0.]]), limit=8)
    assert torch.isnan(m["response_length/correct/mean"][0]) and m["response_length/correct/mean"][1] == 2
    assert m["response_length/incorrect/clip_ratio"].tolist() == [0.5, 0.0]


def test_a_missing_length_split_is_left_out_of_the_record(train_run):
    """NaN means no such response this step: the record leaves the key out rather than logging a NaN."""
    records = read_metrics_jsonl(train_run(TINY_TOKEN)[1] / "metrics.jsonl").records[1:]
    for record in records:
        split = [k for k in record if k.startswith(("response_length/correct", "response_length/incorrect"))]
        assert all(record[k] == record[k] for k in split)  # no NaN
    assert any("response_length/incorrect/mean" in r for r in records)


# ---- dynamic sampling ------------------------------------------------------------------------------------------
# At temperature 0.5 the tiny reverse base answers some prompts right and some wrong: several generation batches of 8
# prompts fill a batch of 8 mixed groups; at temperature 1 its samples are almost never exact (saturated groups).
DYNAMIC = [*TINY_TOKEN, "algorithm.filter_groups.enable=true", "actor_rollout_ref.rollout.temperature=0.5"]


class _Untimed:
    def __call__(self, name):
        import contextlib

        return contextlib.nullcontext()

    def check(self, where):  # the memory guard's interface
        return None


def test_dynamic_sampling_fills_the_batch_with_mixed_groups_from_several_generations():
    from playground.algos.dapo import filter_groups
    from playground.step.dynamic_sampling import DynamicSampler
    from playground.step.workers import TaskRollout

    task, cfg = _task([DYNAMIC]), compose(DYNAMIC)
    from playground.run_spec import resolve_run

    hp = resolve_run([cfg], torch.device("cpu")).step
    sampled = DynamicSampler(task, TaskRollout(task, hp.rollout, hp.rollout_correction), hp.dynamic_sampling) \
        .sample([True], _Untimed(), _Untimed())
    batch, n = sampled.batch, 4
    assert sampled.errors == [None] and sampled.num_gen_batches.tolist()[0] > 1
    assert task.prompts_drawn == [8 * int(sampled.num_gen_batches[0])]
    for key in ("input_ids", "responses", "token_level_scores", "response_length"):
        assert batch[key].shape[:2] == (1, 8 * n), key  # exactly train_batch_size · rollout.n rows
    assert len(batch["response_text"][0]) == len(batch["ground_truth"][0]) == 8 * n
    assert batch["uid"][0].tolist() == [g for g in range(8) for _ in range(n)]
    acc = batch["reward_extra_info"]["acc"][0]
    assert len(filter_groups(acc, batch["uid"][0]).groups) == 8  # every kept group has right and wrong answers
    for i, (text, answer) in enumerate(zip(batch["response_text"][0], batch["ground_truth"][0])):
        assert acc[i] == float(text == answer)  # rows stayed with their texts


def test_dynamic_sampling_logs_its_generation_batches_and_trains_on_no_zero_advantage_group(train_run):
    _, run_dir = train_run(DYNAMIC)
    records = read_metrics_jsonl(run_dir / "metrics.jsonl").records[1:]
    assert [r["train/num_gen_batches"] for r in records] == [3.0, 2.0]
    assert all(r["train/zero_adv_group_ratio"] == 0.0 for r in records)
    _, plain = train_run([*TINY_TOKEN, "actor_rollout_ref.rollout.temperature=0.5"])  # the same groups, unfiltered
    assert all(r["train/zero_adv_group_ratio"] > 0 for r in read_metrics_jsonl(plain / "metrics.jsonl").records[1:])


def test_dynamic_sampling_with_kl_in_the_reward_filters_on_the_final_reward(train_run):
    """metric=seq_final_reward with use_kl_in_reward: each generation batch gets its KL penalty before filtering
    (verl's DAPO trainer), so groups of equal scores but different KL are kept: one generation is enough."""
    from playground.rundir.runs import read_run_info

    _, run_dir = train_run([*DYNAMIC, "algorithm.filter_groups.metric=seq_final_reward",
                            "algorithm.use_kl_in_reward=true", "algorithm.kl_ctrl.kl_coef=0.1"])
    assert read_run_info(run_dir)["status"] == "finished"
    records = read_metrics_jsonl(run_dir / "metrics.jsonl").records[1:]
    assert all(r["train/num_gen_batches"] == 1.0 for r in records[1:])  # step 1: the policy is the reference
    assert all(r["actor/reward_kl_penalty"] > 0 for r in records[1:])


def test_dynamic_sampling_ends_a_run_past_its_cap_as_failed_with_verls_message(train_run):
    from playground.rundir.runs import read_findings, read_run_info

    _, run_dir = train_run([*TINY_TOKEN, "algorithm.filter_groups.enable=true",
                            "algorithm.filter_groups.max_num_gen_batches=2"])
    info = read_run_info(run_dir)
    assert info["status"] == "failed"
    assert info["error"].startswith("ValueError: num_gen_batches=2 >= max_num_gen_batches=2. Generated too many. "
                                    "Please check if your data are too difficult.")
    records = read_metrics_jsonl(run_dir / "metrics.jsonl").records
    assert [r["training/global_step"] for r in records] == [0.0]  # the metrics so far: validation before training
    assert read_findings(run_dir) is not None


def test_dynamic_sampling_has_no_generation_cap_by_default_as_in_verl(train_run):
    """`max_num_gen_batches` defaults to 0, verl's "no upper limit": the default reverse task with dynamic sampling
    on generates until its batch is full (a cap of 10 ended it at step 1)."""
    from playground.config import compose
    from playground.rundir.runs import read_run_info

    assert compose(["task=reverse"]).algorithm.filter_groups.max_num_gen_batches == 0
    _, run_dir = train_run(["task=reverse", "trainer.total_training_steps=2", "trainer.test_freq=-1",
                            "algorithm.filter_groups.enable=true"])
    assert read_run_info(run_dir)["status"] == "finished"
    records = read_metrics_jsonl(run_dir / "metrics.jsonl").records[1:]
    assert [r["training/global_step"] for r in records] == [1.0, 2.0] and records[0]["train/num_gen_batches"] >= 1


def test_a_negative_generation_cap_is_refused():
    with pytest.raises(ConfigError, match="max_num_gen_batches=-1 is out of range"):
        validate(compose([*TINY_TOKEN, "algorithm.filter_groups.max_num_gen_batches=-1"]))


def test_dynamic_sampling_gen_batch_size_without_filtering_is_refused():
    with pytest.raises(ConfigError, match="data.gen_batch_size=16 is out of range without algorithm.filter_groups"):
        validate(compose([*TINY_TOKEN, "data.gen_batch_size=16"]))


def _train_agents(agents: list[list[str]], root) -> tuple[list[str], list]:
    from playground.batched import train_batch

    overrides = [[*o, "trainer.logger=[]", "trainer.progress_bar=false"] for o in agents]
    dirs = [root / f"agent{k}" for k in range(len(agents))]
    return train_batch([compose(o) for o in overrides], dirs, overrides), dirs


def _same_records(alone: list[dict], batched: list[dict]) -> None:
    """Equal within float tolerance: K agents' stacked ops round the last bits differently (tests/test_batched.py)."""
    assert [set(r) for r in alone] == [set(r) for r in batched]
    for a, b in zip(alone, batched):
        for key, value in a.items():
            assert b[key] == pytest.approx(value, rel=1e-3, abs=1e-5), (a["training/global_step"], key)


def test_dynamic_sampling_in_a_batch_gives_each_agent_its_own_generations_as_alone(tmp_path):
    """Two agents (seeds 1 and 2) filter their own groups: they need different numbers of generation batches,
    and each gets the metrics and samples it gets trained alone."""
    agents = [[*DYNAMIC, "trainer.seed=1"], [*DYNAMIC, "trainer.seed=2"]]
    statuses, dirs = _train_agents(agents, tmp_path / "batch")
    assert statuses == ["finished", "finished"]
    gens = []
    for k, overrides in enumerate(agents):
        _, (alone,) = _train_agents([overrides], tmp_path / f"alone{k}")
        _same_records(_stable_records(alone), _stable_records(dirs[k]))
        assert (alone / "samples.jsonl").read_text() == (dirs[k] / "samples.jsonl").read_text()
        gens.append([r["train/num_gen_batches"] for r in _stable_records(dirs[k])[1:]])
    assert gens[0] != gens[1], gens


def test_an_agent_past_the_generation_cap_fails_alone_and_the_other_trains_on(tmp_path):
    """metric=seq_reward: reward noise makes every group mixed for agent 0; agent 1's exact rewards at temperature
    1 are all 0, so it reaches max_num_gen_batches=2 and fails at its first step."""
    from playground.rundir.runs import read_run_info

    common = [*TINY_TOKEN, "algorithm.filter_groups.enable=true", "algorithm.filter_groups.metric=seq_reward",
              "algorithm.filter_groups.max_num_gen_batches=2"]
    statuses, dirs = _train_agents([[*common, "reward.noise_std=0.1"], [*common, "trainer.seed=2"]], tmp_path)
    assert statuses == ["finished", "failed"]
    assert "Generated too many" in read_run_info(dirs[1])["error"]
    assert len(read_metrics_jsonl(dirs[0] / "metrics.jsonl").records) == 3
    assert len(read_metrics_jsonl(dirs[1] / "metrics.jsonl").records) == 1
