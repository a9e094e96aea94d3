"""`playground/algos/registry.py` and `names.py`: a config chooses an algorithm by a declared name, and every declared
name has exactly one registered function."""

from __future__ import annotations

import pytest

import playground.algos.advantages as advantages
import playground.algos.losses as losses
from playground.algos import names
from playground.algos.registry import Registry


def test_every_declared_name_is_registered_and_nothing_else():
    assert sorted(advantages.ADV_ESTIMATORS) == sorted(names.ADV_ESTIMATORS)
    assert sorted(losses.POLICY_LOSSES) == sorted(names.POLICY_LOSSES)
    assert set(names.GROUP_ESTIMATORS) <= set(names.ADV_ESTIMATORS)


def test_register_refuses_an_undeclared_name_and_a_second_function():
    registry = Registry("algorithm.adv_estimator", names=("a", "b"))
    fn = registry.register("a")(lambda: 1)
    assert registry.register("a")(fn) is fn  # registering the same function again is fine (a module re-import)
    with pytest.raises(ValueError, match="already registered"):
        registry.register("a")(lambda: 2)
    with pytest.raises(ValueError, match="not declared"):
        registry.register("c")(lambda: 3)


def test_get_names_the_key_and_the_known_names():
    registry = Registry("algorithm.adv_estimator", names=("a", "b"))
    def fn():
        return 0

    registry.register("b")(fn)
    assert registry.get("b") is fn and "b" in registry and "a" not in registry
    with pytest.raises(ValueError, match=r"algorithm.adv_estimator='zz' is unknown; known: \['b'\]"):
        registry.get("zz")
