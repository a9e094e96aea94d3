"""A name → function registry, as verl's `register_adv_est` / `register_policy_loss` (one implementation for both)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar

F = TypeVar("F", bound=Callable)


class Registry(Generic[F]):
    """Functions by the name a config key selects them with.

    Args:
        key: the config key that names an entry (for error messages), e.g. `algorithm.adv_estimator`.
        names: the names the config may choose (`algos.names`); only these can be registered.
    """

    def __init__(self, key: str, names: Sequence[str]):
        self.key = key
        self.names = tuple(names)
        self._fns: dict[str, F] = {}

    def register(self, name: str) -> Callable[[F], F]:
        """Decorator; refuses an undeclared name, and a name already bound to another function (as verl)."""

        def decorator(fn: F) -> F:
            if name not in self.names:
                raise ValueError(f"{self.key} {name!r} is not declared in playground.algos.names")
            if name in self._fns and self._fns[name] is not fn:
                raise ValueError(f"{self.key} {name!r} is already registered to {self._fns[name]}")
            self._fns[name] = fn
            return fn

        return decorator

    def get(self, name: str) -> F:
        if name not in self._fns:
            raise ValueError(f"{self.key}={name!r} is unknown; known: {sorted(self._fns)}")
        return self._fns[name]

    def __contains__(self, name: object) -> bool:
        return name in self._fns

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._fns))
