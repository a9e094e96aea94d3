"""How a run stops early: Ctrl-C, or a SIGTERM (`kill`, a job scheduler, the explorer's Stop or exit, the demo
stopping), which is made to end a run as Ctrl-C does: run.json says `interrupted` and every metric so far is kept.

Shared by the two command lines that train (`playground.train`, `playground.exercise`).
"""

from __future__ import annotations

import signal
from types import FrameType


class Terminated(KeyboardInterrupt):
    """A SIGTERM, raised where the run is (a KeyboardInterrupt, so every Ctrl-C path handles it)."""


def raise_terminated(signum: int, frame: FrameType | None) -> None:
    """The SIGTERM handler: `signal.signal(signal.SIGTERM, raise_terminated)`."""
    raise Terminated(f"terminated by signal {signal.Signals(signum).name}")


def exit_code(stop: KeyboardInterrupt) -> int:
    """The shell's code for a process ended by this stop: 128 + SIGTERM for a SIGTERM, 130 for Ctrl-C."""
    return 128 + signal.SIGTERM if isinstance(stop, Terminated) else 130
