"""Golden configs: a refactor must leave their training metrics byte-identical.

`python -m benchmarks.golden record out.json` trains every golden config through the public entry
(`python -m playground.train`, one fresh process each; the 3-agent batch through `hydra/launcher=batched`) and writes
each run's metrics and samples minus what depends on the clock or the machine (`timing_s/*`, `timing_per_token_ms/*`,
`perf/*`). `python -m benchmarks.golden compare before.json after.json` says which runs, steps and keys differ (exit
1 if any). Record at the old commit, record at the new one, compare: the check never needs the old code at hand.
`--new-keys-ok`: metrics only the new recording logs (a change that adds metrics) are listed, not counted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUIET = ["trainer.logger=[]", "trainer.progress_bar=false"]
# Keys that measure the clock or the machine, not the training.
VOLATILE_PREFIXES = ("timing_s/", "timing_per_token_ms/", "perf/")

GOLDEN: dict[str, list[str]] = {
    "cartpole": ["task=cartpole", "trainer.total_training_steps=12"],
    "pendulum_kl_in_reward": ["task=pendulum", "trainer.total_training_steps=8", "algorithm.use_kl_in_reward=true",
                              "algorithm.kl_ctrl.kl_coef=0.05"],
    "reverse_ppo": ["task=reverse", "algorithm.adv_estimator=gae", "trainer.total_training_steps=6"],
    "reverse_grpo_kl_loss": ["task=reverse", "actor_rollout_ref.actor.use_kl_loss=true",
                             "actor_rollout_ref.actor.kl_loss_coef=0.01", "trainer.total_training_steps=6"],
    # the knob the set was recorded with (8fbc6f4): a task default changed on purpose is not a refactor's change
    "addition": ["task=addition", "actor_rollout_ref.actor.kl_loss_coef=0.001", "trainer.total_training_steps=6"],
    "reverse_memory_capped": ["task=reverse", "trainer.memory_limit_gb=4", "trainer.total_training_steps=4"],
    # the rollout and the update beyond the defaults: a rollout engine that differs from the trainer under bypass
    # mode, and the decoupled correction (token IS) on a stale rollout
    "reverse_rollout_mismatch": ["task=reverse", "scenario=rollout_mismatch", "trainer.total_training_steps=4"],
    "reverse_decoupled_token_is": ["task=reverse", "scenario=off_policy_staleness",
                                   "+rollout_correction=decoupled_token_is", "trainer.total_training_steps=4"],
    # one run of each prompt set added since (issue 40): countdown's reward, calc's tool turns, frozenlake's game
    "countdown": ["task=countdown", "trainer.total_training_steps=3"],
    "calc": ["task=calc", "trainer.total_training_steps=3"],
    "frozenlake": ["task=frozenlake", "trainer.total_training_steps=2"],
}
# One sweep of three CartPole agents that differ in their learning rate: trained as one batch.
BATCH = ["task=cartpole", "trainer.total_training_steps=8", "hydra/launcher=batched",
         "actor_rollout_ref.actor.optim.lr=1e-3,2.5e-3,5e-3"]


def _stable(record: dict) -> dict:
    return {k: v for k, v in record.items() if not k.startswith(VOLATILE_PREFIXES)}


def _read_run(run_dir: Path) -> dict:
    def lines(name: str) -> list[dict]:
        path = run_dir / name
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.is_file() else []

    info = run_dir / "run.json"
    status = json.loads(info.read_text()).get("status") if info.is_file() else None
    return {"status": status, "metrics": [_stable(r) for r in lines("metrics.jsonl")],
            "samples": lines("samples.jsonl")}


def _train(args: list[str], env: dict) -> None:
    flags = [a for a in args if a.startswith("-")]  # Hydra's flags (-m) before the overrides
    overrides = [a for a in args if not a.startswith("-")]
    done = subprocess.run([sys.executable, "-m", "playground.train", *flags, *QUIET, *overrides], cwd=ROOT, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode:
        raise SystemExit(f"training {' '.join(args)} failed:\n{done.stderr[-2000:]}")


def record(out: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.setdefault("PLAYGROUND_CACHE", str(ROOT / ".cache" / "golden"))  # the SFT bases, built once
    runs: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, overrides in GOLDEN.items():
            run_dir = Path(tmp) / name
            _train([*overrides, f"hydra.run.dir={run_dir}"], env)
            runs[name] = _read_run(run_dir)
            print(f"{name}: {runs[name]['status']}, {len(runs[name]['metrics'])} records", file=sys.stderr)
        sweep = Path(tmp) / "batch"
        _train(["-m", *BATCH, f"hydra.sweep.dir={sweep}"], env)
        for job in sorted(p for p in sweep.iterdir() if p.is_dir() and (p / "run.json").is_file()):
            runs[f"batch/{job.name}"] = _read_run(job)
            print(f"batch/{job.name}: {runs[f'batch/{job.name}']['status']}", file=sys.stderr)
    out.write_text(json.dumps(runs, indent=0, sort_keys=True))


def compare(before: Path, after: Path, new_keys_ok: bool = False) -> int:
    """Every record of every run equal; with `new_keys_ok`, metrics only `after` logs (a later change that adds
    metrics) are listed once and not counted, while every metric both log must still be equal."""
    a, b = json.loads(before.read_text()), json.loads(after.read_text())
    new_keys: set[str] = set()
    problems = [f"{name}: only in {before.name}" for name in sorted(set(a) - set(b))]
    problems += [f"{name}: only in {after.name}" for name in sorted(set(b) - set(a))]
    for name in sorted(set(a) & set(b)):
        ra, rb = a[name], b[name]
        if ra["status"] != rb["status"]:
            problems.append(f"{name}: status {ra['status']} vs {rb['status']}")
        if len(ra["metrics"]) != len(rb["metrics"]):
            problems.append(f"{name}: {len(ra['metrics'])} vs {len(rb['metrics'])} records")
        for i, (x, y) in enumerate(zip(ra["metrics"], rb["metrics"])):
            if new_keys_ok:
                new_keys |= set(y) - set(x)
                y = {k: v for k, v in y.items() if k in x}
            keys = sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))
            if keys:
                shown = ", ".join(f"{k} ({x.get(k)} vs {y.get(k)})" for k in keys[:4])
                problems.append(f"{name} record {i}: {len(keys)} keys differ: {shown}")
                break
        if ra["samples"] != rb["samples"]:
            problems.append(f"{name}: samples.jsonl differs")
    for line in problems:
        print(line)
    if new_keys:
        print(f"metrics only {after.name} logs (not compared): {', '.join(sorted(new_keys))}")
    print(f"{len(a)} runs compared: " + ("identical" if not problems else f"{len(problems)} differences"))
    return 1 if problems else 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "record":
        record(Path(argv[1]))
        return 0
    if len(argv) in (3, 4) and argv[0] == "compare" and argv[3:] in ([], ["--new-keys-ok"]):
        return compare(Path(argv[1]), Path(argv[2]), new_keys_ok=argv[3:] == ["--new-keys-ok"])
    print(__doc__.strip().splitlines()[0],
          "\nusage: python -m benchmarks.golden record OUT | compare A B [--new-keys-ok]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
