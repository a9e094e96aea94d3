"""CartPole with the healthy defaults: env steps/s, steps and seconds to a 10-episode mean of 475, and steps/s at
CleanRL's own config (4 envs × 128 steps, 4 mini-batches × 4 epochs). CleanRL's ppo.py here: ~9,500 steps/s,
~115k env steps and ~12 s to 475 (shared/reference/cleanrl-baseline.md).

    python -m benchmarks.bench_cartpole

A shared machine's speed drifts (this one's by up to 2x within a day), so a fixed CleanRL figure can flatter or
wrong either side. To measure CleanRL side by side, point `CLEANRL_PPO` at CleanRL's `cleanrl/ppo.py` and
`CLEANRL_PYTHON` at an interpreter with its requirements (torch, gymnasium 1.x, tyro, tensorboard): the benchmark
runs it for 500k steps, as the baseline did, between two runs of ours, with the baseline's two gymnasium-1.x edits
applied to a temporary copy.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

from benchmarks.common import emit, first_reaching, median, seconds_until, train

A = "actor_rollout_ref.actor"
CLEANRL = ["task=cartpole", "env.num_envs=4", "env.rollout_length=128", f"{A}.ppo_epochs=4",
           f"{A}.ppo_mini_batch_size=128", f"{A}.optim.lr=2.5e-4", "critic.optim.lr=2.5e-4",
           f"{A}.entropy_coeff=0.01", "algorithm.gamma=0.99", "algorithm.lam=0.95", "trainer.total_training_steps=60"]


def steps_per_second(records: list[dict]) -> float:
    tokens = sum(r["perf/total_num_tokens"] for r in records if "perf/total_num_tokens" in r)
    seconds = sum(r["timing_s/step"] for r in records if "timing_s/step" in r)
    return tokens / seconds


def main() -> None:
    rates, solve_steps, solve_seconds, solved, evals = [], [], [], 0, []
    for seed in (1, 2, 3):
        records, _, trainer = train(["task=cartpole", f"trainer.seed={seed}"])
        rates.append(steps_per_second(records))
        hit = first_reaching(records, "critic/score/mean", 475)
        evals.append(records[-1].get("val/score"))
        if hit:
            solved += 1
            solve_steps.append(hit["training/global_step"] * trainer.task.rows_per_step)
            solve_seconds.append(seconds_until(records, hit["training/global_step"]))
    emit("cartpole_healthy_env_steps_per_s", round(median(rates)), "env steps/s", seeds=3,
         runs=[round(r) for r in rates])
    emit("cartpole_healthy_env_steps_to_475", median(solve_steps), "env steps", solved=f"{solved}/3", runs=solve_steps)
    emit("cartpole_healthy_seconds_to_475", median(solve_seconds) and round(median(solve_seconds), 2), "s",
         runs=[round(s, 2) for s in solve_seconds], target="<= 3 s")
    emit("cartpole_healthy_final_eval_100", evals, "return", note="greedy, 100 fresh episodes at the end")
    records, _, _ = train(CLEANRL)
    rate = steps_per_second(records)
    emit("cartpole_cleanrl_config_env_steps_per_s", round(rate), "env steps/s", cleanrl_ppo_py=9500,
         ratio=round(rate / 9500, 2), target=">= 2x")
    if os.environ.get("CLEANRL_PPO"):
        side_by_side(os.environ["CLEANRL_PPO"], os.environ.get("CLEANRL_PYTHON", "python"), rate)


# The baseline's edits for gymnasium 1.x (shared/reference/cleanrl-baseline.md): SAME_STEP auto-reset, as ppo.py
# was written for, and episode statistics read from gymnasium 1.x's dict of arrays.
_CLEANRL_EDITS = [
    ("for i in range(args.num_envs)],\n    )",
     "for i in range(args.num_envs)],\n        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,\n    )"),
    ('                for info in infos["final_info"]:\n'
     '                    if info and "episode" in info:\n'
     '                        print(f"global_step={global_step}, episodic_return={info[\'episode\'][\'r\']}")\n'
     '                        writer.add_scalar("charts/episodic_return", info["episode"]["r"], global_step)\n'
     '                        writer.add_scalar("charts/episodic_length", info["episode"]["l"], global_step)',
     '                episode = infos["final_info"]["episode"]\n'
     '                for i in np.nonzero(infos["final_info"]["_episode"])[0]:\n'
     '                    print(f"global_step={global_step}, episodic_return={episode[\'r\'][i]}")\n'
     '                    writer.add_scalar("charts/episodic_return", episode["r"][i], global_step)\n'
     '                    writer.add_scalar("charts/episodic_length", episode["l"][i], global_step)'),
]


def side_by_side(ppo_py: str, python: str, first_rate: float) -> None:
    """CleanRL's ppo.py for 500k steps now, on this machine, between two runs of ours: the ratio at one time."""
    source = Path(ppo_py).read_text()
    for old, new in _CLEANRL_EDITS:
        if old not in source:
            emit("cartpole_cleanrl_side_by_side_ratio", None, "x", error=f"{ppo_py}: not the ppo.py the edits "
                 "fit (cleanrl fe8d8a03); measure by hand as shared/reference/cleanrl-baseline.md does")
            return
        source = source.replace(old, new)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "ppo.py").write_text(source)
        out = subprocess.run([python, "-W", "ignore", "ppo.py", "--seed", "1", "--total-timesteps", "500000",
                              "--no-cuda", "--no-track"], cwd=tmp, env={**os.environ, "OMP_NUM_THREADS": "1"},
                             capture_output=True, text=True)
    printed = re.findall(r"^SPS: (\d+)", out.stdout, flags=re.MULTILINE)
    if out.returncode or not printed:
        emit("cartpole_cleanrl_side_by_side_ratio", None, "x", error=(out.stderr.strip().splitlines() or ["?"])[-1])
        return
    cleanrl = int(printed[-1])  # ppo.py's own figure: global steps / seconds since its loop started
    records, _, _ = train(CLEANRL)
    ours = median([first_rate, steps_per_second(records)])
    emit("cartpole_cleanrl_side_by_side_ratio", round(ours / cleanrl, 2), "x", playground=round(ours),
         cleanrl_ppo_py_now=cleanrl, target=">= 2x", note="CleanRL's ppo.py, 500k steps, seed 1, run between two "
         "runs of ours; median of ours")


if __name__ == "__main__":
    main()
