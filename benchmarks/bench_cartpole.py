"""CartPole with the healthy defaults: env steps/s, steps and seconds to a 10-episode mean of 475, and steps/s at
CleanRL's own config (4 envs × 128 steps, 4 mini-batches × 4 epochs). CleanRL's ppo.py here: ~9,500 steps/s,
~115k env steps and ~12 s to 475 (shared/reference/cleanrl-baseline.md).

    python -m benchmarks.bench_cartpole
"""

from __future__ import annotations

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


if __name__ == "__main__":
    main()
