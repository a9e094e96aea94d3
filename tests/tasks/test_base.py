"""The task interface (`playground/tasks/base.py`) is enough to add a task family: a toy with two prompts, written
against the interface alone (as docs/adding-a-task.md walks through it), trains for 2 steps with the shared
trainer and writes an ordinary run directory."""

from __future__ import annotations

import json

import pytest
import torch
from omegaconf import open_dict

from playground.algos.masked import masked_stats
from playground.config import compose
from playground.rundir.runs import read_metrics_jsonl, read_run_info
from playground.tasks.base import Task
from playground.train import build_trainer


class TablePolicy:
    """Logits per prompt, one row each: the whole "model" of the toy."""

    def __init__(self, num_prompts: int, num_tokens: int):
        self.logits = torch.zeros(num_prompts, num_tokens, requires_grad=True)
        self.params = [self.logits]


class TwoPromptTask(Task):
    """Prompt 0 wants token 1, prompt 1 wants token 2 (of 4): a one-token answer, reward 1 when right."""

    family = "toy"
    score_metric = "val/accuracy"
    model_input_keys = ("prompt", "responses")
    targets = torch.tensor([1, 2])

    def __init__(self, cfg, seed: int = 1):
        self.num_agents, self.n = 1, int(cfg.actor_rollout_ref.rollout.n)
        self.rows_per_step = 2 * self.n
        self.rows_per_unit = self.n  # ppo_mini_batch_size counts prompts, as verl
        self.actor = TablePolicy(2, 4)
        self.reference = self.actor.logits.detach().clone()
        self.gen = torch.Generator().manual_seed(seed)

    def describe(self) -> dict:
        return {"action_space": "token", "max_entropy": float(torch.log(torch.tensor(4.0)))}

    def generate(self, agents=None, policy=None):  # policy: None, a table has no rollout engine's copy
        prompt = torch.arange(2).repeat_interleave(self.n)  # each prompt n times: one uid per prompt
        with torch.no_grad():
            tokens = torch.multinomial(self.actor.logits[prompt].softmax(-1), 1, generator=self.gen)
        reward = (tokens.squeeze(-1) == self.targets[prompt]).float().view(1, -1, 1)
        return {"agents": [0], "prompt": prompt.view(1, -1), "uid": prompt.view(1, -1),
                "responses": tokens.view(1, -1, 1), "response_mask": torch.ones(1, self.rows_per_step, 1),
                "scores": reward, "token_level_scores": reward.clone()}

    def _log_probs(self, logits, batch):
        log_probs = logits[batch["prompt"][0]].log_softmax(-1)  # (rows, 4)
        chosen = log_probs.gather(-1, batch["responses"][0])  # (rows, 1)
        entropy = -(log_probs.exp() * log_probs).sum(-1, keepdim=True)
        return chosen.unsqueeze(0), entropy.unsqueeze(0)

    def log_prob_and_entropy(self, batch):
        return self._log_probs(self.actor.logits, batch)

    def ref_log_prob(self, batch):
        return self._log_probs(self.reference, batch)[0]

    def advantage_inputs(self, batch):
        return {"token_level_rewards": batch["token_level_rewards"], "response_mask": batch["response_mask"],
                "index": batch["uid"][0]}

    def batch_metrics(self, batch):
        return masked_stats("critic/score", batch["scores"].sum(-1))

    def token_counts(self, batch):
        return {"response": [self.rows_per_step], "total": [2 * self.rows_per_step]}

    def update_flops(self, batch, role, epochs):
        return 0.0

    def validate(self, policy=None):
        greedy = self.actor.logits.argmax(-1)
        return {"val/accuracy": (greedy == self.targets).float().mean().view(1)}


@pytest.fixture
def toy_cfg():
    cfg = compose(["task=reverse", "trainer.logger=[]", "trainer.progress_bar=false", "trainer.total_training_steps=2",
                   "data.train_batch_size=2", "actor_rollout_ref.actor.ppo_mini_batch_size=1",
                   "actor_rollout_ref.actor.optim.lr=0.5", "actor_rollout_ref.actor.use_kl_loss=true",
                   "trainer.token_records.enable=false"])  # a token task's records: this family has no tokens
    with open_dict(cfg):
        cfg.task.name, cfg.task.family, cfg.task.score_target = "two_prompts", "toy", 1.0
    return cfg


def test_a_third_task_trains_through_the_interface(toy_cfg, tmp_path):
    task = TwoPromptTask(toy_cfg)
    before = task.actor.logits.detach().clone()
    trainer = build_trainer([toy_cfg], [tmp_path], torch.device("cpu"), task=task)
    [outcome] = trainer.fit()
    assert (outcome.status, outcome.steps, outcome.stop_reason) == ("finished", 2, "total_training_steps reached")
    assert not torch.equal(task.actor.logits.detach(), before)  # the trainer's optimizer stepped its parameters
    records = read_metrics_jsonl(tmp_path / "metrics.jsonl").records
    assert [r["training/global_step"] for r in records] == [0.0, 1.0, 2.0]  # val_before_train, then 2 steps
    step = records[-1]
    for key in ("actor/pg_loss", "actor/kl_loss", "actor/grad_norm", "critic/advantages/mean", "critic/score/mean"):
        assert key in step, key
    assert read_run_info(tmp_path)["status"] == "finished"
    assert json.loads((tmp_path / "run.json").read_text())["family"] == "toy"


def test_a_task_must_implement_the_abstract_members():
    class Incomplete(Task):
        family, score_metric, model_input_keys = "toy", "val/accuracy", ()

    with pytest.raises(TypeError, match="abstract"):
        Incomplete()
