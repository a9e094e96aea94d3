"""A name → function registry, as verl's `register_adv_est` / `register_policy_loss` (one implementation for both).

Registered functions take only the keywords they read (no `**kwargs`): a misspelt keyword is a `TypeError`. A
caller that has one set of inputs for every entry (the config's `policy_loss.*` keys, the batch's fields) asks the
registry which of them an entry takes (`Registry.keywords`) and passes just those.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

F = TypeVar("F", bound=Callable)


class Registry(Generic[F]):
    """Functions by the name a config key selects them with.

    Args:
        key: the config key that names an entry (for error messages), e.g. `algorithm.adv_estimator`.
        names: the names the config may choose (`algos.names`); only these can be registered.
        keywords: every keyword a caller may offer an entry; a function that names another one (a typo in its
            signature) is refused at registration.
        positional: the leading arguments every entry takes positionally (a policy loss's per-token tensors).
    """

    def __init__(self, key: str, names: Sequence[str], keywords: Sequence[str] = (), positional: Sequence[str] = ()):
        self.key = key
        self.names = tuple(names)
        self.known_keywords = frozenset(keywords)
        self.positional = tuple(positional)
        self._fns: dict[str, F] = {}
        self._keywords: dict[str, frozenset[str]] = {}

    def register(self, name: str) -> Callable[[F], F]:
        """Decorator; refuses an undeclared name, a name already bound to another function (as verl), a function
        that swallows unknown keywords (`**kwargs`) and one with a keyword no caller offers."""

        def decorator(fn: F) -> F:
            if name not in self.names:
                raise ValueError(f"{self.key} {name!r} is not declared in playground.algos.names")
            if name in self._fns and self._fns[name] is not fn:
                raise ValueError(f"{self.key} {name!r} is already registered to {self._fns[name]}")
            params = inspect.signature(fn).parameters.values()
            if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
                raise TypeError(f"{self.key} {name!r}: a registered function takes only the keywords it reads")
            named = {p.name for p in params}
            strange = named - self.known_keywords - set(self.positional)
            if strange:
                raise TypeError(f"{self.key} {name!r} takes {sorted(strange)}, which no caller offers")
            self._fns[name] = fn
            self._keywords[name] = frozenset(named & self.known_keywords)
            return fn

        return decorator

    def get(self, name: str) -> F:
        if name not in self._fns:
            raise ValueError(f"{self.key}={name!r} is unknown; known: {sorted(self._fns)}")
        return self._fns[name]

    def keywords(self, name: str) -> frozenset[str]:
        """The caller-offered keywords that entry `name` reads."""
        self.get(name)
        return self._keywords[name]

    def select(self, name: str, offered: Mapping[str, Any]) -> dict[str, Any]:
        """The offered keyword arguments entry `name` reads; an offered key no entry knows is a caller's typo."""
        unknown = set(offered) - self.known_keywords
        if unknown:
            raise TypeError(f"{self.key}: no registered function takes {sorted(unknown)}")
        wanted = self.keywords(name)
        return {key: value for key, value in offered.items() if key in wanted}

    def __contains__(self, name: object) -> bool:
        return name in self._fns

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._fns))
