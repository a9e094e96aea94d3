"""`make bench`: every benchmark, one JSON line per figure. Runs each module in turn (1 torch thread)."""

from __future__ import annotations

import importlib
import os
import sys
import time

MODULES = ["bench_cartpole", "bench_tokens", "bench_scenarios", "bench_batched", "bench_torch_envs",
           "bench_generation", "bench_explorer"]


def main() -> int:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    only = sys.argv[1:]
    failed = []
    for name in MODULES:
        if only and name not in only:
            continue
        try:
            module = importlib.import_module(f"benchmarks.{name}")
        except ModuleNotFoundError as error:
            if error.name == f"benchmarks.{name}":
                continue  # not in this checkout
            raise
        start = time.perf_counter()
        print(f"# {name}", file=sys.stderr, flush=True)
        argv, sys.argv = sys.argv, [f"benchmarks.{name}"]  # each benchmark parses its own (empty) arguments
        try:
            module.main()
        except Exception as error:  # noqa: BLE001 - one broken benchmark must not hide the others
            failed.append(name)
            print(f"# {name} failed: {type(error).__name__}: {error}", file=sys.stderr)
        finally:
            sys.argv = argv
        print(f"# {name}: {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
