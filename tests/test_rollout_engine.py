"""The rollout is not the trainer: verl's probes against hand-computed values, the rollout's own weights (precision,
staleness, weight sync), the sampler's reported log-probs, and the keys' checks."""

import math

import pytest
import torch
from torch import nn

from playground.algos.rollout_debug import per_agent, rollout_probs_diff, trajectory_staleness
from playground.config import ConfigError, compose, validate
from playground.rollout.decode import _pick_tokens
from playground.rollout.weights import RolloutSpec, RolloutWeights
from playground.rundir.runs import read_metrics_jsonl

TINY_TOKEN = ["task=reverse", "+debug=tiny", "trainer.total_training_steps=2"]


# ---- verl's calculate_debug_metrics, by hand -------------------------------------------------------------------------
def test_rollout_probs_diff_on_probabilities_masked_by_the_response():
    # probabilities: actor [0.5, 0.2, 0.3 | 0.9], rollout [0.4, 0.2, 0.5 | 0.1]; the last token is masked out
    actor = torch.tensor([[0.5, 0.2], [0.3, 0.9]]).log()
    rollout = torch.tensor([[0.4, 0.2], [0.5, 0.1]]).log()
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    m = rollout_probs_diff(actor, rollout, mask)
    # |diff| = [0.1, 0.0, 0.2]: max 0.2, mean 0.1, unbiased std sqrt((0 + 0.01 + 0.01) / 2) = 0.1
    assert float(m["training/rollout_probs_diff_valid"]) == 1
    assert float(m["training/rollout_probs_diff_max"]) == pytest.approx(0.2, abs=1e-6)
    assert float(m["training/rollout_probs_diff_mean"]) == pytest.approx(0.1, abs=1e-6)
    assert float(m["training/rollout_probs_diff_std"]) == pytest.approx(0.1, abs=1e-6)
    # centred: a = [1/6, -2/15, -1/30], r = [1/30, -1/6, 2/15]: cov 7/300 over sqrt(7/150 · 7/150) = 0.5
    assert float(m["training/rollout_actor_probs_pearson_corr"]) == pytest.approx(0.5, abs=1e-5)


def test_rollout_probs_diff_without_valid_tokens_is_invalid_and_nan():
    m = rollout_probs_diff(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 3))
    assert float(m["training/rollout_probs_diff_valid"]) == 0
    assert math.isnan(float(m["training/rollout_probs_diff_mean"]))


def test_trajectory_staleness_and_per_agent_shapes():
    m = per_agent(trajectory_staleness, torch.tensor([[2, 2, 0], [1, 1, 1]]))
    assert m["training/off_policy/trajectory_staleness/mean"][0].tolist() == pytest.approx([4 / 3, 1.0])
    assert m["training/off_policy/trajectory_staleness/max"][0].tolist() == [2.0, 1.0]
    assert m["training/off_policy/trajectory_staleness/min"][0].tolist() == [0.0, 1.0]


# ---- the sampler's reported log-probs (vLLM's logprobs_mode) ---------------------------------------------------------
def test_processed_logprobs_are_the_truncated_distributions_and_raw_ones_ignore_temperature():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    probs = torch.softmax(logits / 0.5, -1)
    u = torch.tensor([[0.0]])  # inverse CDF at 0: the first kept token (0)
    token, full = _pick_tokens(logits, 0.5, 1.0, u)
    assert int(token) == 0 and float(full) == pytest.approx(math.log(probs[0, 0]), abs=1e-6)
    _, top2 = _pick_tokens(logits, 0.5, 1.0, u, top_k=2)
    assert float(top2) == pytest.approx(math.log(probs[0, 0] / probs[0, :2].sum()), abs=1e-6)
    _, nucleus = _pick_tokens(logits, 0.5, 0.5, u)  # p0 = 0.865 alone reaches 0.5
    assert float(nucleus) == pytest.approx(0.0, abs=1e-6)
    _, raw = _pick_tokens(logits, 0.5, 0.5, u, logprobs_mode="raw_logprobs")
    assert float(raw) == pytest.approx(math.log(torch.softmax(logits, -1)[0, 0]), abs=1e-6)
    tokens, _ = _pick_tokens(logits.expand(50, -1), 1.0, 1.0, torch.rand(50, 1), top_k=2)
    assert set(tokens.tolist()) <= {0, 1}


# ---- the rollout's own weights ---------------------------------------------------------------------------------------
def _spec(**kw) -> RolloutSpec:
    return RolloutSpec(**{"dtype": torch.float32, "staleness": 0, "weight_sync": "full", "weight_sync_skip": (),
                          "calculate_log_probs": False, **kw})


def _step(actor: nn.Module, weights: RolloutWeights, version: float) -> None:
    """The actor reaches `version` (all weights set to it), then the next step's sync."""
    with torch.no_grad():
        for p in actor.parameters():
            p.fill_(version)
    weights.sync()


def test_a_rollout_like_the_trainer_shares_the_actors_weights():
    from playground.step.workers import TaskRollout

    class Task:  # a model to copy, which a rollout like the trainer's never copies
        rollout_source = nn.Linear(2, 2)

    rollout = TaskRollout(Task(), _spec(), _correction_spec(compose(["task=reverse"])))
    assert rollout.weights is None and rollout.policy is None  # the task generates with its own actor
    with pytest.raises(ValueError, match="shares the actor's weights"):
        RolloutWeights(nn.Linear(2, 2), _spec())


def test_a_bf16_rollout_holds_a_rounded_copy_synced_each_step():
    actor = nn.Linear(2, 2)
    weights = RolloutWeights(actor, _spec(dtype=torch.bfloat16))
    assert weights.model is not actor and weights.model.weight.dtype == torch.bfloat16
    _step(actor, weights, 1.001)  # 1.001 is no bf16 number: the copy holds its rounding
    assert float(weights.model.weight[0, 0]) == float(torch.tensor(1.001).bfloat16())
    assert weights.versions_behind == 0


def test_a_stale_rollout_generates_with_the_weights_n_versions_back():
    actor = nn.Linear(2, 2)
    weights = RolloutWeights(actor, _spec(staleness=2))
    seen = []
    for version in range(5):
        _step(actor, weights, float(version))
        seen.append((float(weights.model.weight[0, 0]), weights.versions_behind))
    assert seen == [(0.0, 0), (0.0, 1), (0.0, 2), (1.0, 2), (2.0, 2)]


def test_a_broken_sync_keeps_the_loaded_weights_or_the_skipped_ones():
    actor = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    never = RolloutWeights(actor, _spec(weight_sync="none"))
    partial = RolloutWeights(actor, _spec(weight_sync="partial", weight_sync_skip=("1.",)))
    loaded = [layer.weight.detach().clone() for layer in actor]
    with torch.no_grad():
        for p in actor.parameters():
            p.add_(1.0)
    never.sync(), partial.sync()
    assert torch.equal(never.model[0].weight, loaded[0]) and torch.equal(never.model[1].weight, loaded[1])
    assert torch.equal(partial.model[0].weight, actor[0].weight) and torch.equal(partial.model[1].weight, loaded[1])
    with pytest.raises(ValueError, match="weight_sync_skip"):
        RolloutWeights(actor, _spec(weight_sync="partial", weight_sync_skip=("lm_head.",)))


# ---- the keys --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("override, message", [
    ("actor_rollout_ref.rollout.dtype=int8", "actor_rollout_ref.rollout.dtype='int8'"),
    ("actor_rollout_ref.rollout.staleness=-1", "staleness=-1"),
    ("actor_rollout_ref.rollout.top_k=-2", "top_k=-2"),
    ("actor_rollout_ref.rollout.logprobs_mode=processed_logits", "logprobs_mode"),
    ("actor_rollout_ref.rollout.weight_sync=partial", "weight_sync_skip=[]"),
    ("actor_rollout_ref.rollout.weight_sync_skip=[lm_head.]", "unless weight_sync=partial"),
    ("actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype=fp8", "param_dtype='fp8'"),
])
def test_bad_rollout_keys_fail_with_one_line(override, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        validate(compose(["task=reverse", override]))


def test_a_gym_rollout_is_the_trainer():
    with pytest.raises(ConfigError, match="on gym tasks"):
        validate(compose(["task=cartpole", "actor_rollout_ref.rollout.dtype=bf16"]))


# ---- the rollout's log-probs against the trainer's -------------------------------------------------------------------
def _probs_diff_of(rollout_model, trainer_model) -> float:
    """Generate 8 responses with `rollout_model` and score them with `trainer_model`: verl's probs diff mean."""
    from playground.models.tiny_gpt import compute_log_prob
    from playground.rollout.decode import build_sequences, generate

    prompt = torch.randint(3, 16, (8, 4), generator=torch.Generator().manual_seed(0))
    out = generate(rollout_model, prompt, torch.ones_like(prompt), max_new_tokens=6, eos_id=1, pad_id=0,
                   generator=torch.Generator().manual_seed(1))
    ids, mask, pos = build_sequences(prompt, torch.ones_like(prompt), out)
    with torch.no_grad():  # the trainer's recompute, as the old_log_prob phase does it
        actor, _ = compute_log_prob(trainer_model, ids, mask, pos, out.responses)
    return float(rollout_probs_diff(actor, out.log_probs, out.response_mask)["training/rollout_probs_diff_mean"])


def test_an_fp32_rollout_reports_the_trainers_probabilities_and_a_bf16_one_does_not():
    from playground.models.tiny_gpt import GPTConfig, TinyGPT

    torch.manual_seed(0)
    model = TinyGPT(GPTConfig(vocab_size=16, block_size=16, n_layer=2, n_head=2, n_embd=32)).eval()
    assert _probs_diff_of(model, model) < 1e-6  # the KV cache's rounding only
    bf16 = RolloutWeights(model, _spec(dtype=torch.bfloat16))
    bf16.sync()
    assert 1e-5 < _probs_diff_of(bf16.model, model) < 0.05  # a random model is near uniform: small probabilities


@pytest.mark.slow
def test_a_run_logs_the_probes_only_when_asked(train_run):
    _, plain = train_run(TINY_TOKEN)
    assert not any("rollout_probs" in k for k in read_metrics_jsonl(plain / "metrics.jsonl").records[-1])
    _, probed = train_run([*TINY_TOKEN, "actor_rollout_ref.rollout.calculate_log_probs=true",
                           "actor_rollout_ref.rollout.staleness=1", "actor_rollout_ref.actor.optim.lr=1e-3",
                           "algorithm.adv_estimator=gae"])  # a critic: every token has an advantage, step 1 updates
    first, second = read_metrics_jsonl(probed / "metrics.jsonl").records[-2:]
    # fp32 rollout and trainer on the same weights: the same probabilities up to the KV cache's rounding
    assert first["training/rollout_probs_diff_mean"] < 1e-6
    assert first["training/off_policy/trajectory_staleness/mean"] == 0
    # one update later the rollout still samples with the base: staleness 1, and the probabilities part
    assert second["training/off_policy/trajectory_staleness/max"] == 1
    assert second["training/rollout_probs_diff_mean"] > 1e-4, second["training/rollout_probs_diff_mean"]


def _correction_spec(cfg):
    from playground.algos.rollout_correction.spec import RolloutCorrectionSpec

    return RolloutCorrectionSpec.from_config(cfg.algorithm.rollout_correction)


# ---- the contract with the rollout correction ------------------------------------------------------------------------
class _FakeTask:
    """A task whose generation reports its own log-probs (as the token task does), with no model to copy."""

    rollout_source = None

    def generate(self, agents=None, policy=None):
        return {"response_mask": torch.ones(1, 2, 3), "rollout_log_probs": torch.full((1, 2, 3), -0.5)}


@pytest.mark.parametrize("extra, kept", [
    ({}, False),
    ({"actor_rollout_ref": {"rollout": {"calculate_log_probs": True}}}, True),
    ({"algorithm": {"rollout_correction": {"rollout_is": "token"}}}, True),  # part B's key: the correction reads them
    ({"algorithm": {"rollout_correction": {"rollout_is": None, "rollout_rs": None, "bypass_mode": False}}}, False),
])
def test_the_rollout_hands_on_its_log_probs_when_asked_or_corrected(extra, kept):
    from omegaconf import OmegaConf

    from playground.run_spec import resolve_run
    from playground.step.workers import TaskRollout

    cfg = compose(["task=reverse"])
    OmegaConf.set_struct(cfg, False)  # part B's keys are not in this branch's config yet
    cfg = OmegaConf.merge(cfg, extra)
    rollout = resolve_run([cfg], torch.device("cpu")).step.rollout
    batch = TaskRollout(_FakeTask(), rollout, _correction_spec(cfg)).generate()
    assert ("rollout_log_probs" in batch) == kept


def test_the_trainers_precision_rounds_its_log_probs():
    """fsdp_config.mixed_precision.param_dtype=bf16: the actor's log-prob pass runs under autocast (the old log-probs
    and the update alike), so its log-probs differ from fp32's by bf16 rounding, and come back as fp32."""
    import contextlib

    from playground.train import build_task_for

    cfg = compose([*TINY_TOKEN, "actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype=bf16"])
    validate(cfg)
    cpu = torch.device("cpu")
    task = build_task_for([cfg], cpu)
    batch = task.generate()
    with torch.no_grad():
        bf16, _ = task.log_prob_and_entropy(batch)
        task.trainer_precision = contextlib.nullcontext
        fp32, _ = task.log_prob_and_entropy(batch)
    mask = batch["response_mask"].bool()
    gap = (bf16 - fp32).abs()[mask]
    assert bf16.dtype == torch.float32 and 0 < float(gap.max()) < 0.2


def test_a_dummy_loaded_rollout_keeps_vllms_dummy_weights_where_the_sync_does_not_deliver():
    actor = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    never = RolloutWeights(actor, _spec(weight_sync="none", load_format="dummy"))
    never.sync()
    assert all(float(p.abs().max()) <= 1e-3 for p in never.model.parameters())
    partial = RolloutWeights(actor, _spec(weight_sync="partial", weight_sync_skip=("1.",), load_format="dummy"))
    partial.sync()
    assert torch.equal(partial.model[0].weight, actor[0].weight) and float(partial.model[1].weight.abs().max()) <= 1e-3
