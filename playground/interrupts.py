"""How a run stops early: Ctrl-C or the explorer's Stop (SIGINT: "stopped by you"), or a SIGTERM (`kill`, a job
scheduler, the explorer exiting, the demo stopping), which is made to end a run as Ctrl-C does: run.json says
`interrupted`, with who stopped it, and every metric so far is kept.

Shared by the two command lines that train (`playground.train`, `playground.exercise`).
"""

from __future__ import annotations

import signal
from types import FrameType

# run.json's `error` of a run its user stopped; the explorer says it as such, not as a failure
STOPPED_BY_YOU = "stopped by you"


class Terminated(KeyboardInterrupt):
    """A SIGTERM, raised where the run is (a KeyboardInterrupt, so every Ctrl-C path handles it)."""


def raise_terminated(signum: int, frame: FrameType | None) -> None:
    """The SIGTERM handler: `signal.signal(signal.SIGTERM, raise_terminated)`."""
    raise Terminated(f"terminated by signal {signal.Signals(signum).name}")


def raise_stopped(signum: int, frame: FrameType | None) -> None:
    """The SIGINT handler (Ctrl-C, the explorer's Stop), installed explicitly: a process may start with SIGINT
    ignored (a parent that ignored it), and Python then raises nothing on it."""
    raise KeyboardInterrupt(f"{STOPPED_BY_YOU} (Ctrl-C, or Stop in the explorer)")


def handle_stops() -> None:
    """Ctrl-C, the explorer's Stop and a SIGTERM each end a run as `interrupted`, its metrics kept."""
    signal.signal(signal.SIGINT, raise_stopped)
    signal.signal(signal.SIGTERM, raise_terminated)


def exit_code(stop: KeyboardInterrupt) -> int:
    """The shell's code for a process ended by this stop: 128 + SIGTERM for a SIGTERM, 130 for Ctrl-C."""
    return 128 + signal.SIGTERM if isinstance(stop, Terminated) else 130
