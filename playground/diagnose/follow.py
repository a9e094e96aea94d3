"""`python -m playground.diagnose LOG --follow`: tail a running verl console log, a verl file-logger JSONL or a run's
`metrics.jsonl`, and say each finding once, when it first appears or worsens, with its step and fix.

The file is read as it grows (complete lines only; a file that shrinks was rotated and is read again from the top).
After each read that brought new steps, the whole log so far is diagnosed again, as the engine diagnoses a finished
log, so a finding said live is the one the final report holds. A console's last step line is taken once the file has
been still for one poll (its continuation lines have arrived). Each interval ends with a one-line headline (the run's
state, its last good step, what changed: `diagnose/live.py`), and each finding said can be posted to a webhook. The
watch ends on Ctrl-C, or after `idle_exit` seconds without a new byte, and returns the last report (the command line
prints it in the form asked); it never raises into the run it watches.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from playground import failures
from playground.diagnose import onset
from playground.diagnose.engine import Finding, Report
from playground.diagnose.live import Interval, Webhook, headline
from playground.diagnose.readers import ConsoleParser
from playground.diagnose.report import SEVERITY_WORDS
from playground.diagnose.sources import diagnose_read
from playground.metrics import STEP
from playground.rundir.runs import METRICS, LogRead, is_run_dir, metrics_record

VERDICTS = ("healthy", "inconclusive")  # judged on the whole run: said in the final report, not as they flicker


@dataclass
class _Tail:
    """The bytes of a growing file not yet read, split into complete lines."""

    path: Path
    offset: int = 0
    rest: bytes = b""

    def new_lines(self) -> tuple[list[str], bool]:
        """The complete lines added since the last call, and whether the file was read again from its start."""
        if not self.path.is_file():
            return [], False
        size = self.path.stat().st_size
        restarted = size < self.offset
        if restarted:
            self.offset, self.rest = 0, b""
        if size == self.offset:
            return [], restarted
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            chunk = f.read(size - self.offset)
        self.offset = size
        *lines, self.rest = (self.rest + chunk).split(b"\n")
        return [line.decode("utf-8", errors="replace") for line in lines], restarted


@dataclass
class _Records:
    """The log's steps so far: console lines through verl's console reader, or JSON lines (ours or verl's)."""

    path: Path
    jsonl: bool
    parser: ConsoleParser = field(init=False)
    by_step: dict[int, dict[str, float]] = field(default_factory=dict)
    lines: int = 0

    def __post_init__(self) -> None:
        self.parser = ConsoleParser(self.path.name)

    def reset(self) -> None:
        self.__post_init__()
        self.by_step.clear()
        self.lines = 0

    def add(self, lines: list[str]) -> None:
        for line in lines:
            self.lines += 1
            if not self.jsonl:
                self.parser.feed(self.lines, line + "\n")
            elif line.strip():
                try:
                    record = metrics_record(json.loads(line))
                except (ValueError, TypeError, AttributeError):
                    continue  # a line still being written by a writer without line buffering, or not ours
                if (step := record.get(STEP)) is not None:
                    self.by_step.setdefault(int(step), {}).update(record)

    def read(self, settled: bool) -> LogRead:
        """The log so far; `settled`: the file has been still, so a console's last step line is complete."""
        if not self.jsonl:
            if settled:
                return self.parser.result(str(self.path))
            records = [self.parser.by_step[s] for s in sorted(self.parser.by_step)]
            return LogRead(records=records, problems=list(self.parser.log.lines), source=str(self.path),
                           kind="verl_console", out_of_memory=self.parser.out_of_memory)
        return LogRead(records=[self.by_step[s] for s in sorted(self.by_step)], source=str(self.path), kind="jsonl")


def _rank(f: Finding) -> int:
    return failures.SEVERITY_ORDER.index(f.severity)


def finding_line(f: Finding, lang: str = "en") -> str:
    """One finding as the watcher says it: step, severity, id and title, its onset, its strongest evidence, and its
    fix."""
    title = failures.TITLES.get(f.id, {}).get(lang, f.id)
    bad = next((e for e in f.evidence if e.get("status") == "bad"), f.evidence[0] if f.evidence else None)
    said = f" | {bad['metric']}: {bad['range'] or bad['value']}" if bad else ""
    fix = f" | fix: {f.fix}" if f.fix else ""
    since = f" | {onset.since_text(f, lang)}"
    return f"[step {f.first_step}] {SEVERITY_WORDS[lang][f.severity]} {f.id}: {title}{since}{said}{fix}"


@dataclass
class Watch:
    """What the watcher has said: each finding id with the severity it was said at, and the run's last good step."""

    said: dict[str, int] = field(default_factory=dict)
    good: str | None = None

    def news(self, report: Report) -> list[Finding]:
        """The findings that are new since the last report, or graver than when they were said."""
        out = []
        for f in report.findings:
            if f.id in VERDICTS or self.said.get(f.id, -1) >= _rank(f):
                continue
            self.said[f.id] = _rank(f)
            out.append(f)
        return out


def follow(path: str | Path, *, interval: float = 2.0, idle_exit: float | None = None, lang: str = "en",
           echo: Callable[[str], None] = print, diagnose_kwargs: dict | None = None,
           webhook: str | None = None) -> Report | None:
    """Watch a growing log until Ctrl-C or `idle_exit` seconds without a new byte; say each new or graver finding
    through `echo` (and post it to `webhook`, a URL), and a headline each interval.

    Returns:
        The last report (None when no step was ever read).
    """
    target = Path(path)
    if target.is_dir() and is_run_dir(target):
        target = target / METRICS
    jsonl = target.suffix == ".jsonl"
    tail, records, watch = _Tail(target), _Records(target, jsonl), Watch()
    report, last_change, changed = None, time.monotonic(), False
    hook = Webhook(webhook, run=str(path), lang=lang) if webhook else None
    last_step: int | None = None  # the last step read
    news = Interval([], [])  # what this interval changed
    waiting = not target.exists()
    if waiting:
        echo(f"waiting for {target} ...")

    def judge(settled: bool) -> None:
        nonlocal report, last_step
        read = records.read(settled=settled)
        if read.records or read.ended_with or read.out_of_memory:
            report = diagnose_read(read, **(diagnose_kwargs or {}))
            last_step = int(read.records[-1][STEP]) if read.records else last_step
            said = set(watch.said)
            for finding in watch.news(report):
                line = finding_line(finding, lang)
                echo(line)
                (news.graver if finding.id in said else news.new).append(finding)
                if hook is not None and (failed := hook.post(finding, last_step, line)):
                    echo(failed)
            good = onset.last_good_line(report.last_good, lang)
            if good and good != watch.good:  # said once, and again only where an earlier problem moves it
                news.good_moved = watch.good is not None
                watch.good = good
                echo(good)

    try:
        while True:
            lines, restarted = tail.new_lines()
            if restarted:
                records.reset()
                echo(f"{target} was truncated: reading it again from the start")
            if waiting and target.exists():
                echo(f"reading {target}")
                waiting = False
            now = time.monotonic()
            if lines:
                records.add(lines)
                last_change = now
            if changed or lines:  # judged again once anything changed, and once more when the file settles
                judge(settled=not lines)
                changed = bool(lines)
            echo(headline(report, last_step, news, lang))  # each interval, "no change" included
            news = Interval([], [])
            if idle_exit is not None and now - last_change >= idle_exit:
                break
            time.sleep(interval)
    except KeyboardInterrupt:
        pass
    lines, _ = tail.new_lines()  # whatever arrived last, and the console's last step line
    records.add(lines)
    judge(settled=True)
    if news.new or news.graver or news.good_moved:  # what the last read said, under its headline too
        echo(headline(report, last_step, news, lang))
    return report
