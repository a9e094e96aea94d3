"""Shared test setup: one torch thread, a per-checkout SFT cache, the in-process training helper, and the fixtures
test files would otherwise each re-create (a composed tiny config, a tiny finished run)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
# The SFT base models are built once per checkout (CI: once per run) and reused by every test and run.
os.environ.setdefault("PLAYGROUND_CACHE", str(ROOT / ".cache" / "tests"))
torch.set_num_threads(1)

TINY = ["trainer.logger=[]", "trainer.progress_bar=false"]
DEBUG_TINY = ["task=cartpole", "+debug=tiny"]  # conf/debug/tiny.yaml: seconds, not minutes


def train(overrides: list[str], run_dir: Path):
    """Train `python -m playground.train <overrides>` in this process (`train.fit`); returns `train.Fitted` (the
    trainer, its models inspectable, and each agent's outcome; statuses in `fitted.statuses`).

    A memory-capped run trains in a process of its own instead (`train.needs_own_process`), and None is returned:
    in a long test process the reverse out_of_memory fix grew past its 0.05 GiB cap, against 0.02 GiB alone.
    """
    from playground.config import compose
    from playground.train import fit, needs_own_process, run_in_own_process

    cfg = compose([*TINY, *overrides])
    if needs_own_process(cfg):
        run_in_own_process([*TINY, *overrides], run_dir)
        return None
    return fit([cfg], [run_dir], [overrides])


@pytest.fixture
def train_run(tmp_path):
    """`train_run(overrides)` → (fitted, run_dir) in a fresh tmp dir (`train.Fitted`)."""
    counter = iter(range(1000))

    def _train(overrides: list[str]):
        run_dir = tmp_path / f"run{next(counter)}"
        return train(overrides, run_dir), run_dir

    return _train


@pytest.fixture
def tiny_cfg():
    """A composed, resolved CartPole config at `+debug=tiny` (not yet validated)."""
    from playground.config import compose

    return compose(DEBUG_TINY)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """A finished `+debug=tiny` CartPole run, trained once per session by the real command line
    (`python -m playground.train`, in a subprocess); its dir sits at `<tmp>/outputs/2026-11-30/12-00-00`."""
    run_dir = tmp_path_factory.mktemp("tiny") / "outputs" / "2026-11-30" / "12-00-00"
    out = subprocess.run([sys.executable, "-m", "playground.train", *DEBUG_TINY, f"hydra.run.dir={run_dir}"],
                         cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return run_dir
