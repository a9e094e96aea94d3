"""Tests for `playground/config/overrides.py`: Hydra override strings read once, by Hydra's grammar, values as
written."""

from __future__ import annotations

import pytest

from playground.config.overrides import (
    DELETED,
    OverrideError,
    fix_command,
    key_values,
    parse,
    parse_strict,
    value_of,
    with_replaced,
)


def test_kinds_keys_and_values_as_written():
    o = parse("actor_rollout_ref.actor.optim.lr=1e-3")
    assert (o.key, o.value, o.prefix, o.sweep, o.parsed, o.plain) == ("actor_rollout_ref.actor.optim.lr", "1e-3", "",
                                                                       False, True, True)
    assert (parse("+critic.ppo_epochs=2").prefix, parse("++a=1").prefix, parse("~a").prefix) == ("+", "++", "~")
    assert parse("~a").is_delete and parse("~a").value is None and not parse("+a=1").plain
    assert (parse("hydra/launcher=batched").key, parse("a@pkg=1").key, parse("a@pkg=1").package) == (
        "hydra/launcher", "a", "pkg")
    assert parse("hydra.run.dir='/tmp/a b'").value == "'/tmp/a b'"


def test_sweeps_give_each_value():
    o = parse("task=cartpole,acrobot")
    assert o.sweep and o.choices == ("cartpole", "acrobot")
    assert parse("x=range(1,3)").choices == ("1", "2") and parse("x=[1,2]").choices == ("[1,2]",)


def test_lenient_and_strict():
    odd = parse("+b.c=x=y")  # Hydra refuses the unquoted `=`: still read at the first `=`
    assert (odd.key, odd.value, odd.prefix, odd.parsed) == ("b.c", "x=y", "+", False)
    assert parse("-m").value is None
    with pytest.raises(OverrideError, match="no Hydra override"):
        parse_strict("x y=3")


def test_dicts_values_and_replacing():
    assert key_values(["a=1", "+b.c=x=y", "~d", "a=2"]) == {"a": "2", "b.c": "x=y", "d": DELETED}
    assert value_of(["task=cartpole", "+scenario=x", "scenario=lr_too_high"], "scenario") == "lr_too_high"
    assert value_of(["+scenario=x"], "scenario") is None
    assert with_replaced(["task=c", "lr=1", "+e=2"], ["lr=3", "+e=4"]) == ["task=c", "lr=3", "+e=4"]


def test_fix_command_later_overrides_win():
    command = fix_command(["task=cartpole", "actor_rollout_ref.actor.optim.lr=3e-2", "tag=a b"],
                          "actor_rollout_ref.actor.optim.lr=1e-3 +critic.ppo_epochs=2")
    assert command == (".venv/bin/python -m playground.train task=cartpole 'tag=a b' "
                       "actor_rollout_ref.actor.optim.lr=1e-3 +critic.ppo_epochs=2")
    assert fix_command([], "") == ".venv/bin/python -m playground.train"
