"""`make bench`: every benchmark, one JSON line per figure, each module in a fresh process (one torch thread for a
single run; batches of agents use every core, as `hydra/launcher=batched` does).

A fresh process per benchmark keeps one's state (allocator settings, caches, imported modules) out of the next
one's timings.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

MODULES = ["bench_cartpole", "bench_tokens", "bench_scenarios", "bench_batched", "bench_token_batched",
           "bench_torch_envs", "bench_generation", "bench_multi_turn", "bench_agent_tasks", "bench_countdown",
           "bench_explorer", "bench_matrix", "onset_matrix", "diagnosis_panel", "heldout_split"]
ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    only = sys.argv[1:]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    failed = []
    for name in MODULES:
        if (only and name not in only) or not (ROOT / "benchmarks" / f"{name}.py").is_file():
            continue
        print(f"# {name}", file=sys.stderr, flush=True)
        start = time.perf_counter()
        if subprocess.run([sys.executable, "-m", f"benchmarks.{name}"], cwd=ROOT, env=env).returncode:
            failed.append(name)
            print(f"# {name} failed", file=sys.stderr, flush=True)
        print(f"# {name}: {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
