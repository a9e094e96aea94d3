"""Readers for what wandb shows of a run: its end-of-run console block, and a chart's data exported as CSV.

They return the same `LogRead` as the other readers (`readers.read_any` dispatches to them).

The console block is what `wandb.finish()` prints (`wandb/sdk/wandb_run.py`, `_footer_history_summary_info`):
`Run history:` draws each metric as a sparkline of at most 40 points (`wandb.util.downsample`), each point at level
round(7 * (x - min) / (max - min)) of the characters ▁▂▃▄▅▆▇█, a NaN or ±inf as a blank
(`wandb/sdk/lib/sparkline.py`); `Run summary:` prints each metric's last value, floats rounded to 5 decimals. Both
skip keys starting with `_`, though old versions printed `_step`. So the block gives each metric's shape, and its
size only through the last value: records read from it are coarse (`LogRead.kind` "wandb_history").
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from playground.diagnose.console_text import ANSI, MEGATRON, RAY_PREFIX, to_float
from playground.diagnose.endings import EndWatch
from playground.metric_names import WANDB_STEP
from playground.metrics import STEP, canonical_name, canonicalize
from playground.rundir.runs import LogRead, ProblemLog

BLOCKS = "▁▂▃▄▅▆▇█"  # wandb's spark_chars: level 0 (the line's minimum) to 7 (its maximum)
_TOP = len(BLOCKS) - 1
_PREFIX = re.compile(r"^\s*wandb:(?: |$)")
_HEADER = re.compile(r"^\s*Run(?:\((?P<run>[^)]*)\))? (?P<section>history|summary):\s*$")  # some versions: `Run(name)`
# One space after the right-aligned key; blanks between it and the first block character go with the key.
_SPARK_ROW = re.compile(rf"^\s*(?P<key>\S.*?) (?P<spark>[{BLOCKS}][{BLOCKS} ]*)$")
_VALUE_ROW = re.compile(r"^\s*(?P<key>\S.*?)\s+(?P<value>\S+)$")
_FIRST_STEP = {"_step": 0}  # wandb counts `_step` from 0; verl (and the HF trainer) count global steps from 1
_ROUNDED_ZERO = ("0.0", "-0.0")  # a float that wandb's round(x, 5) printed as zero; an int 0 prints as `0`


def _is_step_key(key: str) -> bool:
    return key in ("_step", WANDB_STEP) or canonical_name(key) == STEP


def _names(keys: list[str], most: int = 6) -> str:
    shown = ", ".join(f"`{k}`" for k in keys[:most])
    return shown + (f" and {len(keys) - most} more" if len(keys) > most else "")


def _row_text(raw: str) -> tuple[str, bool]:
    """A line's text without colour codes, a Ray prefix and `wandb:`, and whether it had `wandb:`."""
    line = RAY_PREFIX.sub("", ANSI.sub("", raw.rstrip("\r\n")), count=1)
    prefix = _PREFIX.match(line)
    return (line[prefix.end():], True) if prefix else (line, False)


def holds_block(lines: Iterable[str]) -> bool:
    """True when the lines hold a `Run history:` or `Run summary:` header (with or without `wandb:` before it)."""
    return any(_HEADER.match(_row_text(line)[0]) for line in lines)


class _BlockParser:
    """Collects the rows of wandb's end-of-run block from a log's lines: sparklines and summary values by key.

    A row broken by a copy-paste goes on in a line without the block's `wandb:` prefix (or, in a block without
    prefixes, a line of one token); it is joined on when the joined row still reads.
    """

    def __init__(self, name: str):
        self.name = name
        self.log = ProblemLog()
        self.history: dict[str, str] = {}  # key -> its sparkline
        self.summary: dict[str, float] = {}  # key -> its last value
        self.rounded_zeros: list[str] = []  # summary keys printed as 0.0
        self.others: list[str] = []  # runs whose blocks follow the first one's, not read
        self._run: str | None = None
        self._read: set[str] = set()  # sections read
        self._section: str | None = None  # the section being read: history | summary | None
        self._prefixed = False  # its rows start with `wandb:`
        self._row: tuple[int, str] | None = None  # (line number, text) of the row being read
        self.ends = EndWatch()  # the lines after the block that say how the run ended (a traceback's, a kill's)
        self.megatron_line = 0  # the first line that names Megatron

    def feed(self, number: int, raw: str) -> None:
        if not self.megatron_line and MEGATRON.search(raw):
            self.megatron_line = number
        text, prefix = _row_text(raw)
        if header := _HEADER.match(text):
            self._start(header, prefix)
        elif self._section is None:
            self.ends.feed(number, text)
            return
        elif self._row is not None and self._continues(text, prefix):
            self._row = (self._row[0], self._row[1] + text)
        elif self._prefixed and not prefix:
            self._end_section()  # other output after the block
            self.ends.feed(number, text)
            return
        else:
            self._finish_row()
            if text.strip():
                self._row = (number, text)
            else:
                self._section = None  # a blank row ends a section
        self.ends.step_seen()  # the block is the run's last steps: what came before it was survived

    def _start(self, header: re.Match[str], prefixed: bool) -> None:
        self._end_section()
        section, run = header["section"], header["run"]
        if self.others or section in self._read or (self._read and run != self._run):
            if (run or "another run") not in self.others:
                self.others.append(run or "another run")
            return
        self._read.add(section)
        self._run, self._section, self._prefixed = run, section, prefixed

    def _continues(self, text: str, prefixed: bool) -> bool:
        assert self._row is not None, "asked only while a row is being read"
        broken = (self._prefixed and not prefixed) or (not self._prefixed and len(text.split()) == 1)
        return broken and bool(text.strip()) and self._parse(self._row[1] + text) is not None

    def _parse(self, text: str) -> tuple[str, str] | None:
        """(key, sparkline or value text) of a row of the current section, None when it does not read."""
        row = (_SPARK_ROW if self._section == "history" else _VALUE_ROW).match(text.rstrip())
        if row is None or (self._section == "summary" and to_float(row["value"]) is None):
            return None
        return row["key"].strip(), row["spark" if self._section == "history" else "value"].strip()

    def _end_section(self) -> None:
        self._finish_row()
        self._section = None

    def _finish_row(self) -> None:
        row, self._row = self._row, None
        if row is None:
            return
        number, text = row
        where = f"{self.name} line {number}" if self.name else f"line {number}"
        parsed = self._parse(text)
        if parsed is None:
            what = "`key sparkline`" if self._section == "history" else "`key number`"
            self.log.skip(where, f"not a {what} row", f": {text.strip()[:60]!r}")
        elif self._section == "history":
            self.history[parsed[0]] = parsed[1]
        else:
            key, value = parsed
            last_value = to_float(value)
            assert last_value is not None, "_parse reads a summary row only with a number"
            self.summary[key] = last_value
            if value in _ROUNDED_ZERO:
                self.rounded_zeros.append(key)

    def result(self, source: str) -> LogRead:
        self._end_section()
        name = self.name or "text"
        if self.others:
            self.log.add(f"{name}: also holds the wandb block of {_names(self.others)}: not read (one run a log)")
        if not self.history and not self.summary:
            if not self.log.lines:
                self.log.add(f"{name}: no wandb `Run history:` or `Run summary:` rows found")
            return LogRead(records=[], problems=self.log.lines, source=source, kind="wandb_history",
                           skipped=self.log.skipped)
        read = _block_read(self.history, self.summary, self.rounded_zeros, self.log, name, source)
        # how the run ended, after its block
        return dataclasses.replace(read, megatron_line=self.megatron_line, **self.ends.fields())


def _step_axis(summary: dict[str, float]) -> tuple[int, int] | None:
    """(first, last) step from the summary's `_step` or global step, None without one."""
    for key, value in summary.items():
        if _is_step_key(key) and math.isfinite(value):
            last = int(value)
            return min(_FIRST_STEP.get(key, 1), last), last
    return None


def _spread(n: int, first: int, last: int) -> list[int]:
    """n steps spread evenly over [first, last], as wandb's downsample picks them from the logged points."""
    if n == 1:
        return [last]
    return [round(first + i * (last - first) / (n - 1)) for i in range(n)]


def sparkline_values(spark: str, last: float | None) -> tuple[list[float], bool]:
    """The values a sparkline's points stand for, and whether they carry the metric's scale.

    Each character is read as a bar of its height, zero one level below ▁ (for a negative last value: above █),
    scaled so the last bar equals the summary's last value: signs stay, and so do rough ratios (an entropy drawn
    █▇▆…▁ that ends at 0.05 starts at 0.4). A blank is NaN. Without a finite last value, or with a last value of
    0 on a line that is not flat, the points are the levels in [0, 1] (shifted so that a 0 stays the last
    point's): a shape with no scale. A non-finite last value was drawn as a blank, which a paste loses at the end
    of a line: it becomes one more point.
    """
    levels = [None if c == " " else BLOCKS.index(c) for c in spark]
    end = next(k for k in reversed(levels) if k is not None)
    flat = len({k for k in levels if k is not None}) == 1
    if last is not None and math.isfinite(last) and (last != 0 or flat):
        if last > 0:
            bar = lambda k: last * (k + 1) / (end + 1)
        elif last < 0:
            bar = lambda k: last * (len(BLOCKS) - k) / (len(BLOCKS) - end)
        else:
            bar = lambda k: 0.0
        return [math.nan if k is None else bar(k) for k in levels], True
    shift = end if last == 0 else 0
    values = [math.nan if k is None else (k - shift) / _TOP for k in levels]
    return values + ([last] if last is not None and not math.isfinite(last) else []), False


def _block_read(history: dict[str, str], summary: dict[str, float], rounded_zeros: list[str], log: ProblemLog,
                name: str, source: str) -> LogRead:
    """The records of a wandb block: each sparkline's points spread over the run's steps, the summary's values
    of metrics without a sparkline at the last step; `log` says what is coarse or unknown in them."""
    metrics = {k: s for k, s in history.items() if not _is_step_key(k) and not k.startswith("_")}
    axis = _step_axis(summary)
    longest = max((len(s) for s in metrics.values()), default=1)
    first, last = axis or (0, longest - 1)
    by_step: dict[int, dict[str, float]] = {}
    unscaled = []
    for key, spark in metrics.items():
        values, scaled = sparkline_values(spark, summary.get(key))
        if not scaled:
            unscaled.append(key)
        for step, value in zip(_spread(len(values), first, last), values, strict=True):
            by_step.setdefault(step, {})[key] = value
    for key, value in summary.items():
        if key not in metrics and not _is_step_key(key) and not key.startswith("_"):
            by_step.setdefault(last, {})[key] = value
    if metrics:
        steps = f"steps {first}-{last}" if axis else f"positions 0-{last} (no `_step` or {STEP} in the summary)"
        log.add(f"{name}: wandb's end-of-run sparklines, not the logged values: {len(metrics)} metrics drawn on "
                f"8 levels, up to {longest} points each, read as bars scaled to the run summary's last values, "
                f"over {steps}")
    elif axis is None:
        log.add(f"{name}: no `_step` or {STEP} in the run summary: its values are put at step 0")
    _caveats(name, unscaled, [k for k, s in metrics.items() if " " in s], rounded_zeros, log)
    records = [{**canonicalize(by_step[s]), STEP: float(s)} for s in sorted(by_step)]
    return LogRead(records=records, problems=log.lines, source=source,
                   kind="wandb_history" if metrics else "wandb_summary", skipped=log.skipped,
                   unscaled=list(dict.fromkeys(canonical_name(k) for k in unscaled)))


def _caveats(name: str, unscaled: list[str], blanks: list[str], rounded_zeros: list[str], log: ProblemLog) -> None:
    """One line for each kind of value the block cannot give: no scale, a blank point, a summary rounded to 0."""
    if unscaled:
        log.add(f"{name}: the scale of {_names(unscaled)} is unknown (no finite, nonzero summary value to anchor "
                "the sparkline): their values are levels in [0, 1], for trends only")
    if blanks:
        log.add(f"{name}: blank points in the sparklines of {_names(blanks)}: wandb draws a NaN or ±inf as a blank, "
                "read as NaN")
    if rounded_zeros:
        log.add(f"{name}: the run summary's 0.0 for {_names(rounded_zeros)} may be any value below 5e-06 (wandb "
                "rounds it to 5 decimals)")


def _parse_block(lines: Iterable[str], name: str, source: str) -> LogRead:
    parser = _BlockParser(name)
    for number, raw in enumerate(lines, start=1):
        parser.feed(number, raw)
    return parser.result(source)


def parse_wandb_text(text: str, *, name: str = "") -> LogRead:
    """Read a pasted wandb end-of-run block from a string; see `read_wandb_block`."""
    return _parse_block(text.split("\n"), name, name)


def read_wandb_block(path: str | Path) -> LogRead:
    """Read the metrics of wandb's end-of-run block (`wandb: Run history:` sparklines, `wandb: Run summary:`).

    Ray prefixes, colour codes, `wandb:` prefixes and rows broken by a copy-paste are handled; noise around the
    block is ignored. With more than one run's block, the first is read and `problems` names the others.

    Returns:
        Coarse records (`kind` "wandb_history"): each sparkline's points (`sparkline_values`) spread evenly over
        [first, last step] from the summary's `_step` or global step (else over their positions), the summary's
        values of metrics without a sparkline at the last step; `unscaled` names the metrics whose values are
        levels only. A block with a summary only gives one record of exact last values (`kind` "wandb_summary").

    Raises:
        FileNotFoundError: no file at `path`.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no log file at {path}")
    with open(path, "rb") as f:
        return _parse_block((raw.decode("utf-8", errors="replace") for raw in f), path.name, str(path))


# ---- CSV exports ------------------------------------------------------------------------------------------------

_CSV_STEPS = ("step", "_step", WANDB_STEP, STEP, "global_step")  # compared lower-case
_ENVELOPE = re.compile(r"__(?:MIN|MAX)$")  # a chart's min/max band around each run's line
_NO_NAME = re.compile(r"^(?:Unnamed: \d+)?$")  # an empty header, or pandas' index column read back


def _csv_columns(header: list[str], step: int | None) -> list[tuple[int, str | None, str]]:
    """(index, run or None, metric) of each metric column: `<run> - <metric>` (a chart's export) or `<metric>`."""
    columns = []
    for i, title in enumerate(header):
        if i == step or _NO_NAME.match(title) or _ENVELOPE.search(title):
            continue
        run, sep, metric = title.rpartition(" - ")
        if not metric.startswith("_"):  # wandb's own `_step`, `_runtime`, `_timestamp`
            columns.append((i, run if sep else None, metric))
    return columns


def _choose_run(columns: list[tuple[int, str | None, str]], run: str | None, name: str,
                log: ProblemLog) -> list[tuple[int, str]] | None:
    """The (index, metric) columns of the run to read, None when `run` is not in the file."""
    runs = list(dict.fromkeys(r for _, r, _ in columns if r is not None))
    chosen = run if run is not None else (runs[0] if runs else None)
    if run is not None and run not in runs:
        log.add(f"{name}: no run named {run!r} (its runs: {_names(runs)})")
        return None
    if len(runs) > 1:
        log.add(f"{name}: holds {len(runs)} runs; read {chosen!r}, not {_names([r for r in runs if r != chosen])}")
    return [(i, metric) for i, r, metric in columns if r in (None, chosen)]


def read_wandb_csv(path: str | Path, *, run: str | None = None) -> LogRead:
    """Read a wandb chart's data exported as CSV ("Export panel data"), or a run's history saved as CSV.

    A chart's export has a `Step` column (or `_step`, `train/global_step`, `training/global_step`) and per run a
    `<run> - <metric>` column with its `__MIN` and `__MAX` (the band drawn around the line: not read); the values
    are the points the chart drew, which may be sampled. A history's CSV has a column per metric. With several
    runs the first is read (or `run`) and `problems` names the others; a file without a step column is read in
    row order from step 0; a runs table (a row per run) is not read.

    Returns:
        One record per step, canonical names, `training/global_step` = the step column's value; rows that cannot
        be read are counted in `skipped`.

    Raises:
        FileNotFoundError: no file at `path`.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no CSV file at {path}")
    name, log = path.name, ProblemLog()
    rows = csv.reader(io.StringIO(path.read_bytes().decode("utf-8-sig", errors="replace"), newline=""))
    by_step: dict[int, dict[str, float]] = {}
    try:
        header = [title.strip() for title in next(rows, [])]
        step = next((i for i, title in enumerate(header) if title.lower() in _CSV_STEPS), None)
        selected = _csv_plan(header, step, run, name, log)
        if selected:
            _csv_rows(rows, header, step, selected, name, log, by_step)
        if selected and not by_step:
            log.add(f"{name}: no values in its rows")
    except csv.Error as e:  # e.g. a field over csv's size limit: not a CSV export; keep what was read
        log.add(f"{name} line {rows.line_num}: not readable as CSV ({e}); the rest of the file is not read")
    records = [{**canonicalize(by_step[s]), STEP: float(s)} for s in sorted(by_step)]
    return LogRead(records=records, problems=log.lines, source=str(path), kind="csv", skipped=log.skipped)


def _csv_plan(header: list[str], step: int | None, run: str | None, name: str,
              log: ProblemLog) -> list[tuple[int, str]]:
    """The (index, metric) columns to read; none, with a problem said, when the file is not a run's metrics."""
    if not header:
        log.add(f"{name}: empty")
        return []
    if step is None and {"Name", "State"} <= set(header):
        log.add(f"{name}: a row per run (wandb's runs table), not a row per step: not read; export a chart's data "
                "or a run's history instead")
        return []
    selected = _choose_run(_csv_columns(header, step), run, name, log)
    if selected == []:
        log.add(f"{name}: no metric columns (`<run> - <metric>`, or one per metric) under its header")
    elif selected and step is None:
        log.add(f"{name}: no step column ({', '.join(_CSV_STEPS)}): rows are numbered from 0")
    return selected or []


def _csv_rows(rows: Any, header: list[str], step: int | None, selected: list[tuple[int, str]], name: str,
              log: ProblemLog, by_step: dict[int, dict[str, float]]) -> None:
    """Into `by_step` (step -> values), the selected columns of the data rows of `rows` (a csv.reader: its
    line_num names a row's line); a row that cannot be read is skipped and counted."""
    index = -1
    for row in rows:
        if not any(cell.strip() for cell in row):
            continue
        index += 1
        where = f"{name} line {rows.line_num}"
        if len(row) != len(header):
            log.skip(where, "wrong number of fields", f" ({len(row)}, the header has {len(header)})")
            continue
        at = float(index) if step is None else to_float(row[step])
        if at is None or not math.isfinite(at):
            log.skip(where, "no step", f" ({row[step]!r})")
            continue
        record: dict[str, float] = {}
        for i, metric in selected:
            cell = row[i].strip()
            if cell and (value := to_float(cell)) is not None:
                record[metric] = value
            elif cell:
                log.add(f"{where}: `{header[i]}` is not a number ({cell[:40]!r}), skipped", ("not a number", i))
        if record:
            by_step.setdefault(int(at), {}).update(record)
