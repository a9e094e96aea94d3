"""PPO's clip range as verl's actor reads it: `clip_ratio_low` and `clip_ratio_high`, each left null meaning
`clip_ratio`. The one place that rule is written: the losses, the trainer's config, the Lab and the replay's knobs
and the explorer's clip band all ask it. Torch-free, so the explorer may import it."""

from __future__ import annotations

from typing import TypeVar

Bound = TypeVar("Bound")  # a float, a tensor, a config value: whatever the caller holds


def resolve_clip_range(clip_ratio: Bound, clip_ratio_low: Bound | None, clip_ratio_high: Bound | None
                       ) -> tuple[Bound, Bound]:
    """`(ε_low, ε_high)`: the ratio is clipped to `[1 - ε_low, 1 + ε_high]`; a bound that is None is `clip_ratio`."""
    return (clip_ratio if clip_ratio_low is None else clip_ratio_low,
            clip_ratio if clip_ratio_high is None else clip_ratio_high)
