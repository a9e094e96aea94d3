"""The note a rule leaves when the log is shorter than its window, and the one line they fold into.

A one-step log leaves some twenty rules short of data; listed one a line they buried the notes that say something
about the log (the on-policy shortcut, a clipped gradient norm). The report says it once: which rules need more
steps, and how many each needs.
"""

from __future__ import annotations

from itertools import groupby


def steps_text(n: int) -> str:
    return f"{n} step{'s' * (n != 1)}"


class TooLittleData(str):
    """`<rule>: too little data (n steps, needs m)`: a note that also keeps its rule, steps and need for folding."""

    rule: str
    steps: int
    needs: int

    def __new__(cls, rule: str, steps: int, needs: int) -> TooLittleData:
        note = super().__new__(cls, f"{rule}: too little data ({steps_text(steps)}, needs {needs})")
        note.rule, note.steps, note.needs = rule, steps, needs
        return note


def fold_too_little(short: list[TooLittleData]) -> list[str]:
    """One line for every rule the log is too short for (a single one keeps its own note), e.g. "too little data:
    19 rules need more than the 1 step logged (3 for gradient_explosion; 5 for entropy_collapse, ...; ...)"."""
    if len(short) < 2:
        return list(short)
    counts = sorted({note.steps for note in short})  # a rule counts the steps that hold its metrics
    had = steps_text(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]} steps"
    groups = [f"{needs} for {', '.join(note.rule for note in notes)}"
              for needs, notes in groupby(sorted(short, key=lambda note: note.needs), key=lambda note: note.needs)]
    return [f"too little data: {len(short)} rules need more than the {had} logged ({'; '.join(groups)})"]
