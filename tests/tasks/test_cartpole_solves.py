"""Healthy CartPole solves: a 10-episode training mean of 475 and >= 475 over 100 fresh greedy episodes at the end."""

import pytest

from playground.rundir.runs import read_metrics_jsonl


def _solved(run_dir) -> tuple[bool, bool]:
    records = read_metrics_jsonl(run_dir / "metrics.jsonl").records
    during = any(r.get("critic/score/mean", 0) >= 475 for r in records)
    return during, records[-1].get("val/score", 0) >= 475


def test_healthy_cartpole_solves(train_run):
    _, run_dir = train_run(["task=cartpole"])
    assert _solved(run_dir) == (True, True)


@pytest.mark.slow
def test_healthy_cartpole_solves_on_four_of_five_seeds(train_run):
    solved = [_solved(train_run(["task=cartpole", f"trainer.seed={seed}"])[1]) for seed in (1, 2, 3, 4, 5)]
    assert sum(all(s) for s in solved) >= 4, solved
