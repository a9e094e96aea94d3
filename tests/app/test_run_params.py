"""Tests for `app/run_params.py`: overrides as a dict, seed groups, differing parameters."""

from __future__ import annotations

import run_params


def test_overrides_seed_groups_and_differing_params():
    assert run_params.parse_overrides(["a=1", "+b.c=x=y", "~d"]) == {"a": "1", "b.c": "x=y", "d": "(deleted)"}
    assert run_params.seed_group_key(["lr=1", "seed=0"]) == run_params.seed_group_key(["seed=3", "lr=1"])
    assert run_params.seed_group_key(["lr=1", "trainer.seed=2"]) == run_params.seed_group_key(["lr=1"])
    assert run_params.seed_group_key(["lr=1"]) != run_params.seed_group_key(["lr=2"])
    table = run_params.differing_params({"r1": ["task=c", "lr=1", "seed=0"], "r2": ["task=c", "lr=2"]})
    assert list(table.columns) == ["lr", "seed"]
    assert table.loc["r2", "seed"] == "—"
