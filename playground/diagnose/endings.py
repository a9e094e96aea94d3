"""How a run ended, read from the lines its log prints after the last step line (the forms: endings.yaml).

A process that dies prints its end in whatever voice killed it: Python's exception line (its frames often trimmed by
a launcher or a paste), the shell's `Killed` or `Segmentation fault (core dumped)`, NCCL's watchdog, a CUDA error, Ray's
death messages. Each line after the last step line is matched against the table; the line that says the most is how
the run ended (`EndWatch.ending`), and it is the evidence: the id it proves (out_of_memory, else training_crash) and
whether the text names the cause or only a candidate (Ray's own death message lists an OOM kill as one of three).
A line before the last step line was survived: the run went on.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import yaml

TABLE = Path(__file__).with_name("endings.yaml")
IDS = ("out_of_memory", "training_crash")  # what an ending proves, the first the most telling
CAUSES = ("named", "candidate")  # the cause is in the text | the text names none for sure
MAX_TEXT = 200  # an ending's line, as evidence, is cut to this many characters
PYTHON_EXCEPTION = "python_exception"  # the form of an exception's own line (`Type: message`)


class EndFields(TypedDict):
    """How a log ended, as `LogRead` holds it."""

    ended_with: str  # the line
    ended_how: str  # what it tells (`Ending.said`)
    out_of_memory: bool  # it proves an out-of-memory error


@dataclass(frozen=True)
class EndingForm:
    name: str
    pattern: re.Pattern[str]
    unless: re.Pattern[str] | None
    id: str
    cause: str
    candidates: str  # for a candidate: what may have killed the process
    source: str

    def matches(self, line: str) -> bool:
        return bool(self.pattern.search(line)) and not (self.unless and self.unless.search(line))


@dataclass(frozen=True)
class Ending:
    line: int  # its line number in the log
    text: str  # the line, cut to MAX_TEXT
    form: EndingForm

    @property
    def rank(self) -> tuple[int, int]:
        """Lower says more: an out-of-memory proof first, then a cause named, then a candidate."""
        return IDS.index(self.form.id), CAUSES.index(self.form.cause)

    def said(self) -> str:
        """What the line tells, for the evidence's range."""
        if self.form.cause == "named":
            return f"how the run ended ({self.form.name}): the cause is in this text"
        return f"how the run ended ({self.form.name}): a candidate, the text names no cause for sure: " \
               f"{self.form.candidates}"


def _compile(spec: dict, where: str) -> EndingForm:
    missing = [key for key in ("name", "pattern", "id", "cause", "source") if key not in spec]
    if missing:
        raise ValueError(f"{where}: a form without {', '.join(missing)}")
    if spec["id"] not in IDS or spec["cause"] not in CAUSES:
        raise ValueError(f"{where} ({spec['name']}): id must be one of {IDS}, cause one of {CAUSES}")
    if spec["cause"] == "candidate" and not spec.get("candidates"):
        raise ValueError(f"{where} ({spec['name']}): a candidate form says its `candidates`")
    try:
        pattern = re.compile(spec["pattern"])
        unless = re.compile(spec["unless"]) if spec.get("unless") else None
    except re.error as e:
        raise ValueError(f"{where} ({spec['name']}): not a regular expression: {e}") from e
    return EndingForm(name=spec["name"], pattern=pattern, unless=unless, id=spec["id"], cause=spec["cause"],
                candidates=spec.get("candidates", ""), source=spec["source"])


@functools.lru_cache(maxsize=1)
def _table() -> dict:
    return yaml.safe_load(TABLE.read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=1)
def forms() -> tuple[EndingForm, ...]:
    """endings.yaml's forms, in their order (the first that matches a line names it).

    Raises:
        ValueError: a form lacks a field, names an unknown id or cause, or its pattern does not compile.
    """
    return tuple(_compile(spec, f"{TABLE.name} form {i + 1}") for i, spec in enumerate(_table()["forms"]))


@functools.lru_cache(maxsize=1)
def ignored() -> re.Pattern[str]:
    """The lines CPython prints above an exception it ignores (endings.yaml's `ignored`), as one pattern."""
    return re.compile("|".join(f"(?:{spec['pattern']})" for spec in _table()["ignored"]))


def form_of(line: str) -> EndingForm | None:
    """The first form the line (its colour codes and Ray prefix removed) takes, or None."""
    text = line.strip()
    return next((form for form in forms() if form.matches(text)), None) if text else None


class EndWatch:
    """Keeps the lines since the last step line (`step_seen` forgets them) and finds how the run ended among them.

    A line is matched only once no step line follows it (when `ending` is asked, or every `BATCH` lines): matching
    costs some 35 us a line (16 forms, on this project's 2-core machine), and most of a long log's lines lie between
    two steps: a 51,000-line log of 1,000 steps reads in 1.4-1.7 s, as fast as before the table (matched as they came:
    4.5 s).
    """

    BATCH = 10_000  # lines kept unmatched at most (a long stretch without a step line is matched as it comes)

    def __init__(self) -> None:
        self._lines: list[tuple[int, str]] = []  # (number, line) since the last step line, not yet matched
        self._endings: list[Ending] = []
        self._ignoring = False  # CPython said it ignores the next exception (`Exception ignored in: ...`)

    def step_seen(self) -> None:
        self._lines.clear()
        self._endings.clear()
        self._ignoring = False

    def feed(self, number: int, line: str) -> None:
        self._lines.append((number, line))
        if len(self._lines) >= self.BATCH:
            self._match()

    def _match(self) -> None:
        for number, line in self._lines:
            if ignored().search(line):
                self._ignoring = True
                continue
            form = form_of(line)
            if form is not None and form.name == PYTHON_EXCEPTION and self._ignoring:
                self._ignoring = False  # the exception CPython ignored: the process went on, or had finished
            elif form is not None:
                self._endings.append(Ending(number, line.strip()[:MAX_TEXT], form))
        self._lines.clear()

    def fields(self) -> EndFields:
        """The `LogRead` fields of how the log ended: `ended_with` (the line), `ended_how`, `out_of_memory`."""
        ending = self.ending()
        if ending is None:
            return EndFields(ended_with="", ended_how="", out_of_memory=False)
        return EndFields(ended_with=ending.text, ended_how=ending.said(), out_of_memory=ending.form.id == IDS[0])

    def ending(self) -> Ending | None:
        """The line after the last step that says the most of how the run ended (of equal ones, the last)."""
        self._match()
        best = None
        for ending in self._endings:
            if best is None or ending.rank <= best.rank:
                best = ending
        return best
