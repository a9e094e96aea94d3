"""Shared test setup: one torch thread, a per-checkout SFT cache, and helpers that train tiny runs in-process."""

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


def train(overrides: list[str], run_dir: Path):
    """Train `python -m playground.train <overrides>` in this process; returns the Trainer (models inspectable).

    A run under a memory cap trains in a fresh process instead, and None is returned, as the exercises do: on CPU
    the cap measures the process's memory growth, and in a long test process that depends on the runs before it
    (the reverse out_of_memory fix grows 0.02 GiB alone, past its 0.05 cap after some hundred other tests).
    """
    from playground.train import compose, prepare, write_findings
    from playground.trainer import Trainer

    cfg = compose([*TINY, *overrides])
    if cfg.trainer.memory_limit_gb is not None:
        subprocess.run([sys.executable, "-m", "playground.train", *TINY, *overrides, f"hydra.run.dir={run_dir}"],
                       cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, check=False)
        return None
    trainer = Trainer([cfg], [run_dir], prepare(cfg), extra_infos=[{"overrides": overrides}])
    trainer.statuses = trainer.fit()
    write_findings(run_dir, cfg)
    return trainer


@pytest.fixture
def train_run(tmp_path):
    """`train_run(overrides)` → (trainer, run_dir) in a fresh tmp dir."""
    counter = iter(range(1000))

    def _train(overrides: list[str]):
        run_dir = tmp_path / f"run{next(counter)}"
        return train(overrides, run_dir), run_dir

    return _train
