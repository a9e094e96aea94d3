"""What the console readers (`readers` for verl's step lines, `readers_wandb` for wandb's end-of-run block) both
strip from a pasted line and how both read a printed number; shared here so neither reader imports the other's."""

from __future__ import annotations

import re

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\[[0-9;]*m")  # also colour codes whose ESC was lost in a paste
RAY_PREFIX = re.compile(r"^\((?:[A-Za-z_][\w.\-]*\s+)?pid=\d+(?:,\s*ip=[^)\s]+)?\)\s?")
# verl's Megatron backend, as a log shows it: its printed config (`strategy: megatron`, `actor.strategy=megatron`), its
# workers (MegatronPPOActor, megatron_workers) or Megatron-Core's own lines; it sets the scale of kl_loss and grad_norm
MEGATRON = re.compile(r"megatron", re.IGNORECASE)
_NUMPY_SCALAR = re.compile(r"^(?:np|numpy)\.(?:float|int|uint)\d*\((.+)\)$")  # pformat of numpy >= 2 scalars


def to_float(text: str) -> float | None:
    """The number verl printed (`0.123`, `1.2e-05`, `nan`, `-inf`, `True`, `np.float64(0.5)`), else None."""
    text = text.strip()
    scalar = _NUMPY_SCALAR.match(text)
    if scalar:
        text = scalar[1]
    if text in ("True", "False"):  # bool is a numbers.Number, so verl prints it
        return float(text == "True")
    try:
        return float(text)
    except ValueError:
        return None
