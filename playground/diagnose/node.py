"""The base of every condition `rules.yaml` names: the step predicates and window statistics of `conditions`, and the
shapes of a whole series (`shapes`), which `conditions` builds and so cannot be imported by."""

from __future__ import annotations

from collections.abc import Sequence

from playground.diagnose.log import Log


class Node:
    """A condition. `at(log, i)`: a step predicate at record i; `over(log, idx)`: judged on a window."""

    def at(self, log: Log, i: int) -> bool | None:
        raise TypeError(f"{type(self).__name__} is a window condition, not a step predicate")

    def over(self, log: Log, idx: Sequence[int]) -> bool | None:
        return self.at(log, idx[-1]) if idx else None

    def evidence(self, log: Log, idx: Sequence[int]) -> list[dict]:
        return []
