"""Step throughput of the torch classic-control ports (playground/envs/torch_classic.py) vs gymnasium's vector envs.

One JSON line per (env, K, N): µs per batched `step` (median and best of `--repeats` timed chunks: the machine
is shared) and env steps/s at the median; random actions, one thread, `torch.inference_mode()`. `--gym` adds
gymnasium's numpy vector env (`vector_entry_point`) where one exists, else its `sync` vector env.
Run from the repo root: `python -m benchmarks.bench_torch_envs [--device cuda] [--gym]`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from playground.envs.torch_classic import TORCH_ENVS, make_torch_env


def _random_actions(env, steps: int) -> list[torch.Tensor]:
    """Pre-drawn actions so the timed loop measures only `step`; continuous ones overshoot the bounds."""
    shape = (steps, env.num_agents, env.num_envs)
    if env.discrete:
        acts = torch.randint(env.num_actions, shape, device=env.device)
    else:
        acts = (torch.rand((*shape, env.action_dim), device=env.device) * 2 - 1) * 1.5 * env.action_high
    return list(acts.unbind(0))


def _row(impl: str, env_id: str, device: str, k: int, n: int, chunk_us: list[float]) -> dict:
    us = statistics.median(chunk_us)
    return {"impl": impl, "env": env_id, "device": device, "K": k, "N": n, "us_per_step": round(us, 2),
            "us_per_step_best": round(min(chunk_us), 2), "env_steps_per_s": round(k * n / us * 1e6)}


def bench_torch(env_id: str, num_agents: int, num_envs: int, device: str, steps: int, repeats: int) -> dict:
    env = make_torch_env(env_id, num_agents, num_envs, seeds=list(range(num_agents)), device=device)
    env.reset()
    actions = _random_actions(env, steps)
    sync = torch.cuda.synchronize if env.device.type == "cuda" else lambda: None
    chunk_us = []
    with torch.inference_mode():
        for a in actions[: steps // 10]:  # warm-up (allocator, first pool refill)
            env.step(a)
        for _ in range(repeats):
            sync()
            t0 = time.perf_counter()
            for a in actions:
                env.step(a)
            sync()
            chunk_us.append((time.perf_counter() - t0) / steps * 1e6)
    return _row("torch", env_id, device, num_agents, num_envs, chunk_us)


def bench_gym_vector(env_id: str, num_envs: int, steps: int, repeats: int) -> dict:
    import gymnasium as gym

    mode = "vector_entry_point" if gym.spec(env_id).vector_entry_point is not None else "sync"
    envs = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode=mode)
    envs.reset(seed=0)
    actions = [envs.action_space.sample() for _ in range(steps)]
    chunk_us = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for a in actions:
            envs.step(a)
        chunk_us.append((time.perf_counter() - t0) / steps * 1e6)
    return _row(f"gymnasium_{mode}", env_id, "cpu", 1, num_envs, chunk_us)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--envs", nargs="*", default=list(TORCH_ENVS))
    parser.add_argument("--agents", type=int, nargs="*", default=[1, 8, 64])
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--steps", type=int, default=1000, help="steps per timed chunk")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--gym", action="store_true", help="also time gymnasium's vector env")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for env_id in args.envs:
        for k in args.agents:
            row = bench_torch(env_id, k, args.num_envs, args.device, args.steps, args.repeats)
            print(json.dumps(row), flush=True)
        if args.gym:
            print(json.dumps(bench_gym_vector(env_id, args.num_envs, args.steps, args.repeats)), flush=True)


if __name__ == "__main__":
    main()
