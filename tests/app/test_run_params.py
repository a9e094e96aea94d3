"""Tests for `app/run_params.py`: seed groups and differing parameters of runs' overrides."""

from __future__ import annotations

from playground.config.overrides import key_values

import run_params


def test_overrides_seed_groups_and_differing_params():
    assert key_values(["a=1", "+b.c=x=y", "~d"]) == {"a": "1", "b.c": "x=y", "d": "(deleted)"}
    assert run_params.seed_group_key(["lr=1", "seed=0"]) == run_params.seed_group_key(["seed=3", "lr=1"])
    assert run_params.seed_group_key(["lr=1", "trainer.seed=2"]) == run_params.seed_group_key(["lr=1"])
    assert run_params.seed_group_key(["lr=1"]) != run_params.seed_group_key(["lr=2"])
    table = run_params.differing_params({"r1": ["task=c", "lr=1", "seed=0"], "r2": ["task=c", "lr=2"]})
    assert list(table.columns) == ["lr", "seed"]
    assert table.loc["r2", "seed"] == "—"
