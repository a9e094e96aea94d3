"""Batched agents: which sweep jobs share a Trainer, and whether a batched agent trains as it would alone.

Batched and solo runs agree within float tolerance, not bit for bit: `baddbmm` over K agents rounds the last
bits differently from K = 1 (~1e-8 relative at step 1, at most ~2e-4 after 10 steps here). Training amplifies
such differences (a ratio that rounds across the clip boundary flips a token), so the runs stay short.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from playground.batched import (
    batch_signature,
    batch_threads,
    leaf_values,
    plan_batches,
    train_batch,
    unbatchable_reason,
)
from playground.config import compose
from playground.config.keys import config_diff

ROOT = Path(__file__).resolve().parents[1]
# A small CartPole run: 8 envs × 16 steps, 2 mini-batches of 64 × 2 epochs, 10 steps, 10 eval episodes.
SMALL = ["task=cartpole", "trainer.logger=[]", "trainer.progress_bar=false", "env.num_envs=8", "env.rollout_length=16",
         "actor_rollout_ref.actor.ppo_mini_batch_size=64", "actor_rollout_ref.actor.ppo_epochs=2",
         "trainer.total_training_steps=10", "env.eval_episodes=10"]
LR, CLIP, SEED = "actor_rollout_ref.actor.optim.lr", "actor_rollout_ref.actor.clip_ratio_high", "trainer.seed"
AGENTS = [[f"{LR}=1e-3", f"{SEED}=1"], [f"{LR}=2e-3", f"{CLIP}=0.1", f"{SEED}=2"],
          [f"{LR}=3e-3", f"{CLIP}=0.3", f"{SEED}=3"]]
# reward × 1e30 overflows the value loss to inf at once: the critic's gradient is non-finite every step.
EXPLODING = ["reward.scale=1e30", f"{SEED}=2"]
UNTIMED = ("timing_s/", "timing_per_token_ms/", "perf/")  # wall-clock and memory: differ between any two runs
# when it ran and which agent it was; and whether the SFT base came from the cache (the first run of a fresh checkout
# builds it, the next ones load it)
RUN_INFO_VOLATILE = ("start_time", "end_time", "agent", "sft_cached")
# A ratio within rounding of 1 ± clip can land on either side: a clip fraction may differ by a token or two.
FRACTION_TOL = {"actor/pg_clipfrac": 2 / 512, "actor/pg_clipfrac_lower": 2 / 512, "critic/vf_clipfrac": 2 / 512}


def _train(agents: list[list[str]], root: Path) -> tuple[list[str], list[Path]]:
    """Train the given override lists as one batch (K = len(agents)) into `root/agent<k>`."""
    cfgs = [compose([*SMALL, *o]) for o in agents]
    dirs = [root / f"agent{k}" for k in range(len(agents))]
    return train_batch(cfgs, dirs, [[*SMALL, *o] for o in agents]), dirs


def _metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _assert_same_metrics(solo: list[dict], batched: list[dict], rel: float = 1e-3, abs_: float = 1e-5) -> None:
    assert len(solo) == len(batched)
    for a, b in zip(solo, batched):
        assert {k for k in a if not k.startswith(UNTIMED)} == {k for k in b if not k.startswith(UNTIMED)}
        for key, value in a.items():
            if key.startswith(UNTIMED):
                continue
            other = b[key]
            if isinstance(value, str) or isinstance(other, str):  # "NaN" / "Infinity" are written as strings
                assert value == other, (a["training/global_step"], key)
            else:
                tol = FRACTION_TOL.get(key, abs_)
                assert math.isclose(value, other, rel_tol=rel, abs_tol=tol), (a["training/global_step"], key,
                                                                              value, other)


@pytest.fixture(scope="module")
def solo_runs(tmp_path_factory) -> dict[int, Path]:
    """Each agent of `AGENTS` trained alone (K = 1), as `python -m playground.train` would."""
    root = tmp_path_factory.mktemp("solo")
    return {k: _train([agents], root / str(k))[1][0] for k, agents in enumerate(AGENTS)}


# ---- planning -------------------------------------------------------------------------------------------------
def test_plan_batches_jobs_that_share_shapes_and_says_why_another_runs_alone():
    cfgs = [compose([*SMALL, f"{LR}=1e-3"]), compose([*SMALL, f"{LR}=2e-3", f"{SEED}=7"]),
            compose([*SMALL, "env.num_envs=16"])]
    plan = plan_batches(cfgs, job_ids=[4, 5, 6])
    assert plan.batches == [[0, 1]]
    assert plan.solo == {2: "differs from the batch of jobs 4, 5 in env.num_envs (16 vs 8)"}
    assert plan.lines == ["batch of 2 agents (jobs 4, 5): differing in actor_rollout_ref.actor.optim.lr, "
                          "trainer.seed",
                          "job 6 runs alone: differs from the batch of jobs 4, 5 in env.num_envs (16 vs 8)"]


def test_plan_splits_groups_larger_than_max_agents():
    cfgs = [compose([*SMALL, f"{SEED}={s}"]) for s in range(5)]
    plan = plan_batches(cfgs, max_agents=2)
    assert plan.batches == [[0, 1], [2, 3], [4]]
    assert plan.lines[0] == "batch of 2 agents (jobs 0, 1): differing in trainer.seed"
    assert plan.lines[2] == "batch of 1 agent (job 4): identical configs"


def test_token_jobs_batch_and_gymnasium_envs_run_alone():
    token, probe, cartpole = compose(["task=reverse"]), compose(["task=probe1"]), compose(["task=cartpole"])
    assert unbatchable_reason(token) is None and unbatchable_reason(cartpole) is None
    assert unbatchable_reason(probe) == ("env.backend=gymnasium steps playground/Probe1-v0 with gymnasium on the "
                                         "host (batches need a torch port)")
    other_model = compose(["task=reverse", "actor_rollout_ref.model.n_embd=32"])
    plan = plan_batches([cartpole, token, compose(["task=reverse", f"{LR}=1e-4"]), other_model])
    assert plan.batches == [[1, 2]]
    assert plan.lines[0] == f"batch of 2 agents (jobs 1, 2): differing in {LR}"
    assert plan.solo[0].startswith("differs from the batch of jobs 1, 2 in ")
    assert plan.solo[3] == "differs from the batch of jobs 1, 2 in actor_rollout_ref.model.n_embd (32 vs 64)"


def test_jobs_with_config_errors_get_a_line_and_no_batch():
    cfgs = [compose(SMALL), compose(SMALL)]
    plan = plan_batches(cfgs, errors={1: f"{CLIP}=1.5 is out of range: allowed in (0, 1)"})
    assert plan.batches == [] and plan.solo == {0: "no other job in this sweep can be batched with it"}
    assert plan.lines[-1] == f"job 1: error: {CLIP}=1.5 is out of range: allowed in (0, 1)"


def test_batch_threads_auto_gives_a_batch_every_core_and_a_lone_agent_its_own_setting(monkeypatch):
    cores = len(os.sched_getaffinity(0))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert batch_threads("auto", 64) == batch_threads("auto", 2) == cores
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # a shell that asks for one thread (make) caps auto
    assert batch_threads("auto", 64) == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "64")
    assert batch_threads("auto", 64) == cores
    monkeypatch.setenv("OMP_NUM_THREADS", "")  # unset in effect
    assert batch_threads("auto", 64) == cores
    assert batch_threads("auto", 1) is None and batch_threads(None, 64) is None and batch_threads(3, 1) == 3
    for bad in (0, -1, "many", 1.5, True):
        with pytest.raises(ValueError, match="hydra.launcher.num_threads"):
            batch_threads(bad, 8)


def test_batch_signature_ignores_per_agent_keys_only():
    base = batch_signature(compose(["task=cartpole"]))
    assert batch_signature(compose(["task=cartpole", f"{LR}=1e-2", "trainer.seed=7"])) == base
    assert batch_signature(compose(["task=cartpole", "env.num_envs=8"])) != base


def test_config_diff_lists_changed_added_and_removed_keys():
    a, b = {"x": 1, "y": [1, 2], "z": 3}, {"x": 1, "y": [1, 3], "w": 0}
    assert config_diff(a, b) == [("w", "(absent)", 0), ("y", [1, 2], [1, 3]), ("z", 3, "(absent)")]
    assert leaf_values(compose(SMALL))["env.num_envs"] == 8


# ---- training --------------------------------------------------------------------------------------------------
def test_batched_agents_match_their_solo_runs(tmp_path, solo_runs):
    statuses, dirs = _train(AGENTS, tmp_path)
    assert statuses == ["finished"] * 3
    for k, run_dir in enumerate(dirs):
        _assert_same_metrics(_metrics(solo_runs[k]), _metrics(run_dir))
        solo_info = json.loads((solo_runs[k] / "run.json").read_text())
        info = json.loads((run_dir / "run.json").read_text())
        assert {key: v for key, v in info.items() if key not in RUN_INFO_VOLATILE} == \
            {key: v for key, v in solo_info.items() if key not in RUN_INFO_VOLATILE}
        assert info["command"].startswith(".venv/bin/python -m playground.train task=cartpole")
        assert (run_dir / "findings.json").is_file() and (run_dir / ".hydra" / "config.yaml").is_file()


def test_an_exploding_agent_stops_alone(tmp_path, solo_runs):
    statuses, dirs = _train([AGENTS[0], EXPLODING, AGENTS[2]], tmp_path)
    assert statuses == ["finished", "diverged", "finished"]
    info = json.loads((dirs[1] / "run.json").read_text())
    assert info["status"] == "diverged" and info["error"] == "losses stayed non-finite for 3 steps"
    assert len(_metrics(dirs[1])) == 3  # diverge_patience = 3 non-finite steps, then it stops
    for k in (0, 2):
        _assert_same_metrics(_metrics(solo_runs[k]), _metrics(dirs[k]))


def test_an_exploding_agent_leaves_the_others_bit_identical(tmp_path):
    _, calm = _train(AGENTS, tmp_path / "calm")
    _, wild = _train([AGENTS[0], EXPLODING, AGENTS[2]], tmp_path / "wild")
    for k in (0, 2):
        strip = lambda rs: [{key: v for key, v in r.items() if not key.startswith(UNTIMED)} for r in rs]  # noqa: E731
        assert strip(_metrics(calm[k])) == strip(_metrics(wild[k]))


STEPS = "trainer.total_training_steps"


WD, ENT = "actor_rollout_ref.actor.optim.weight_decay", "actor_rollout_ref.actor.entropy_coeff"
PAIRS = [  # (id, agent 1's overrides, agent 2's)
    ("gamma", ["algorithm.gamma=0.99"], ["algorithm.gamma=0.9"]),
    ("grad_clip", ["actor_rollout_ref.actor.grad_clip=null"], ["actor_rollout_ref.actor.grad_clip=0.5"]),
    ("critic_lr", ["critic.optim.lr=1e-3"], ["critic.optim.lr=5e-3"]),
    ("total_steps", [f"{STEPS}=3", "trainer.test_freq=-1"], [f"{STEPS}=5", "trainer.test_freq=-1"]),
    ("total_steps_validated", [f"{STEPS}=3", "trainer.test_freq=2"], [f"{STEPS}=5", "trainer.test_freq=2"]),
    ("weight_decay", [f"{WD}=0.0"], [f"{WD}=0.5"]),
    ("reward_noise", ["reward.noise_std=0.0"], ["reward.noise_std=0.5"]),
    ("entropy_coeff", [f"{ENT}=0.0", f"{LR}=2e-2"], [f"{ENT}=0.01", f"{LR}=2e-2"]),
]


@pytest.mark.parametrize("first, second", [pytest.param(a, b, id=name) for name, a, b in PAIRS])
def test_each_per_agent_key_stays_per_agent(tmp_path, first, second):
    agents = [[*o, f"{SEED}={s}"] for s, o in enumerate((first, second), 1)]
    agents = [a if any(o.startswith(STEPS) for o in a) else [*a, f"{STEPS}=4"] for a in agents]
    _, dirs = _train(agents, tmp_path / "batch")
    for k, agent in enumerate(agents):
        _, (solo,) = _train([agent], tmp_path / f"solo{k}")
        _assert_same_metrics(_metrics(solo), _metrics(dirs[k]))


# ---- token agents ----------------------------------------------------------------------------------------------
# +debug=tiny on reverse: 8 prompts × 4 samples a step, 2 mini-batches of 4 prompts (the second one off-policy, so
# clip_ratio_high binds), validation before training and at the last step.
TOKEN = ["task=reverse", "+debug=tiny", "actor_rollout_ref.actor.ppo_mini_batch_size=4", f"{STEPS}=3",
         "trainer.test_freq=3"]
HIGH = "actor_rollout_ref.actor.clip_ratio_high"
TOKEN_AGENTS = [[f"{LR}=3e-4", f"{ENT}=0.0", f"{HIGH}=0.2", f"{SEED}=1"],
                [f"{LR}=1e-3", f"{ENT}=0.01", f"{HIGH}=0.28", f"{SEED}=2"],
                [f"{LR}=1e-4", f"{ENT}=0.003", f"{HIGH}=0.24", f"{SEED}=3"]]


def _train_tokens(agents: list[list[str]], root: Path, extra: list[str]) -> tuple[list[str], list[Path]]:
    cfgs = [compose([*TOKEN, *extra, *o]) for o in agents]
    dirs = [root / f"agent{k}" for k in range(len(agents))]
    return train_batch(cfgs, dirs, [[*TOKEN, *extra, *o] for o in agents]), dirs


@pytest.mark.parametrize("estimator, agent_chunk", [("grpo", None), ("gae", 1)])
def test_batched_token_agents_match_their_solo_runs(tmp_path, monkeypatch, estimator, agent_chunk):
    """GRPO, and PPO with a critic; with `agent_chunk=1` every pass without gradients (rollout, old log-probs,
    reference, values, validation) runs one agent at a time (`AgentView`), as a large batch does on CPU."""
    import playground.tasks.agent_passes as agent_passes

    extra = [f"algorithm.adv_estimator={estimator}"]
    for k, agent in enumerate(TOKEN_AGENTS):
        _train_tokens([agent], tmp_path / f"solo{k}", extra)
    if agent_chunk is not None:  # the bytes of one agent's smallest pass: one agent per chunk
        monkeypatch.setattr(agent_passes, "CPU_PASS_BYTES", agent_chunk)
    statuses, dirs = _train_tokens(TOKEN_AGENTS, tmp_path / "batch", extra)
    assert statuses == ["finished"] * 3
    for k, run_dir in enumerate(dirs):
        solo = tmp_path / f"solo{k}" / "agent0"
        _assert_same_metrics(_metrics(solo), _metrics(run_dir))
        assert (run_dir / "samples.jsonl").read_text() == (solo / "samples.jsonl").read_text()
        info, solo_info = (json.loads((d / "run.json").read_text()) for d in (run_dir, solo))
        assert {key: v for key, v in info.items() if key not in RUN_INFO_VOLATILE} == \
            {key: v for key, v in solo_info.items() if key not in RUN_INFO_VOLATILE}
    records = _metrics(dirs[1])
    assert ("critic/vf_loss" in records[1]) == (estimator == "gae")
    assert any(r.get("actor/pg_clipfrac", 0) > 0 for r in records)  # the off-policy mini-batch clips


def test_a_token_batch_decodes_its_first_validation_once_with_the_base(monkeypatch):
    """Before any update every agent is the base: the batch's validation decodes the base once (one agent's rows,
    the base's plain layers) and gives each agent the numbers of a run of its own, bit for bit; once an agent's
    weights differ, every agent decodes its own."""
    import torch

    import playground.tasks.token_task as token_task
    from playground.train import build_task_for

    calls = []

    def spy(model, prompt_ids, *args, **kwargs):
        calls.append((model, prompt_ids.shape[0]))
        return generate(model, prompt_ids, *args, **kwargs)

    generate = token_task.generate
    monkeypatch.setattr(token_task, "generate", spy)
    device = torch.device("cpu")

    def task_for(agents):
        cfgs = [compose([*TOKEN, *o]) for o in agents]
        return build_task_for(cfgs, device)

    solo = task_for(TOKEN_AGENTS[:1]).validate()
    batch = task_for(TOKEN_AGENTS)
    rows = len(batch.data.val) * batch.spec.validation.n
    calls.clear()
    shared = batch.validate()
    assert [(model is batch.ref_model, count) for model, count in calls] == [(True, rows)]
    assert shared.keys() == solo.keys()
    for key, values in shared.items():
        assert values.tolist() == solo[key].tolist() * 3, key
    with torch.no_grad():
        next(batch.model.parameters())[1] += 1e-3  # agent 1 leaves the base
    calls.clear()
    batch.validate()
    assert sum(count for _, count in calls) == 3 * rows and all(m is not batch.ref_model for m, _ in calls)


def test_a_token_agent_with_a_huge_lr_diverges_alone(tmp_path):
    quiet = ["trainer.test_freq=-1", "trainer.val_before_train=false", f"{STEPS}=4"]
    agents = [[*quiet, *TOKEN_AGENTS[0]], [*quiet, f"{LR}=1e30", f"{SEED}=2"], [*quiet, *TOKEN_AGENTS[2]]]
    _, calm = _train_tokens([agents[0], agents[2]], tmp_path / "calm", [])
    statuses, dirs = _train_tokens(agents, tmp_path / "wild", [])
    assert statuses == ["finished", "diverged", "finished"]
    info = json.loads((dirs[1] / "run.json").read_text())
    records = _metrics(dirs[1])
    assert info["error"] == "losses stayed non-finite for 3 steps" and len(records) < 4  # stopped before the end
    assert all(r["actor/pg_loss"] == "NaN" for r in records[-3:])
    strip = lambda rs: [{key: v for key, v in r.items() if not key.startswith(UNTIMED)} for r in rs]  # noqa: E731
    for mine, alone in ((dirs[0], calm[0]), (dirs[2], calm[1])):  # the neighbours' NaNs change none of their bits
        assert strip(_metrics(mine)) == strip(_metrics(alone))


# ---- through Hydra ---------------------------------------------------------------------------------------------
def _sweep(tmp_path: Path, *overrides: str, task: str = "cartpole") -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "playground.train", "-m", "hydra/launcher=batched", f"task={task}",
                           "trainer.logger=[]", f"hydra.sweep.dir={tmp_path}", *overrides],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_a_sweep_trains_as_one_batch_through_the_hydra_entry_point(tmp_path):
    out = _sweep(tmp_path, f"{LR}=1e-3,2e-3", "trainer.total_training_steps=3")
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"batch of 2 agents (jobs 0, 1): differing in {LR}" in out.stdout
    for job, lr in ((0, "0.001"), (1, "0.002")):
        run_dir = tmp_path / str(job)
        info = json.loads((run_dir / "run.json").read_text())
        assert info["status"] == "finished" and f"{LR}={lr}" in info["overrides"]
        assert info["num_threads"] == batch_threads("auto", 2)  # the launcher's default for a batch on CPU
        assert [r["training/global_step"] for r in _metrics(run_dir)] == [1, 2, 3]
        for name in ("findings.json", ".hydra/config.yaml", ".hydra/hydra.yaml", ".hydra/overrides.yaml", "train.log"):
            assert (run_dir / name).is_file(), name


def test_a_sweep_prints_its_progress_and_ends_with_a_table(tmp_path):
    """Plain progress lines while it trains (stdout is a pipe here, as in a log or CI), at most one a tenth of the
    steps and one at the end; then the dir, one row per job (its lr, verdict and score, as the run dirs have them)
    and the command that opens the sweep in the explorer."""
    from playground.diagnose.root_causes import chain, run_root
    from playground.metrics import fmt
    from playground.rundir.runs import read_findings
    from playground.rundir.score import run_score

    out = _sweep(tmp_path, "+debug=tiny", f"{LR}=1e-3,2e-2")  # two agents, 4 steps each
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    progress = [line for line in lines if line.startswith("sweep ") and " steps | " in line]
    assert 1 <= len(progress) <= 11, progress
    for line in progress:
        assert re.fullmatch(r"sweep +\d+ % \| \d/8 steps \| \d/2 runs done \| \d+:\d\d (elapsed, .+ left|in all)", line)
    assert progress[-1].startswith("sweep 100 % | 8/8 steps | 2/2 runs done | ")
    top = next(i for i, line in enumerate(lines) if line.startswith("sweep done: 2 runs in "))
    assert top > lines.index(progress[-1]) and lines[top].endswith(f", in {tmp_path}")
    header, *rows = lines[top + 2:top + 5]
    assert header.split() == ["job", "lr", "verdict", "critic/score/mean"]
    for job, (row, lr) in enumerate(zip(rows, ("0.001", "0.02"))):
        run_dir = tmp_path / str(job)
        assert row.split() == [str(job), lr, run_root(chain(read_findings(run_dir))), fmt(run_score(run_dir))]
    assert lines[top + 5:] == ["", f"explore: PLAYGROUND_RUNS={tmp_path} .venv/bin/streamlit run app   (Sweeps page)"]


def test_jobs_that_differ_in_shape_fall_back_to_one_by_one(tmp_path):
    out = _sweep(tmp_path, "env.num_envs=8,16", "trainer.total_training_steps=2", "trainer.progress_bar=false",
                 "env.eval_episodes=5")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "job 0 runs alone: differs from job 1 in env.num_envs (8 vs 16)" in out.stdout
    assert "job 1 runs alone: differs from job 0 in env.num_envs (16 vs 8)" in out.stdout
    for job in (0, 1):
        info = json.loads((tmp_path / str(job) / "run.json").read_text())
        assert info["status"] == "finished" and info["agent"] is None  # trained by the ordinary path


def test_a_token_sweep_trains_as_batches_of_jobs_that_share_shapes(tmp_path):
    out = _sweep(tmp_path, "+debug=tiny", f"{STEPS}=2", "trainer.test_freq=-1", "trainer.val_before_train=false",
                 f"{LR}=1e-4,3e-4", "data.train_batch_size=8,16", task="reverse")
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"batch of 2 agents (jobs 0, 2): differing in {LR}" in out.stdout
    assert f"batch of 2 agents (jobs 1, 3): differing in {LR}" in out.stdout
    for job in range(4):
        info = json.loads((tmp_path / str(job) / "run.json").read_text())
        assert info["status"] == "finished" and info["agent"] in (0, 1)
        assert (tmp_path / str(job) / "samples.jsonl").is_file()
