"""Shared test setup: one torch thread, a per-checkout SFT cache, and helpers that train tiny runs in-process."""

from __future__ import annotations

import os
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

    A memory-capped run trains in a process of its own instead (`train.needs_own_process`), and None is returned:
    in a long test process the reverse out_of_memory fix grew past its 0.05 GiB cap, against 0.02 GiB alone.
    """
    from playground.train import compose, needs_own_process, prepare, run_in_own_process, write_findings
    from playground.trainer import Trainer

    cfg = compose([*TINY, *overrides])
    if needs_own_process(cfg):
        run_in_own_process([*TINY, *overrides], run_dir)
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
