"""Readers for metrics logged outside the playground: verl console logs and TensorBoard event dirs.

They mirror verl's loggers (`verl/utils/tracking.py`: `concat_dict_to_str` for the console, `add_scalar`
under `tensorboard_log/<project>/<experiment>`) and return the same `LogRead` as `runs.read_metrics_jsonl`;
`read_any` also dispatches to the readers of wandb's console block and CSV exports (`readers_wandb`) and of MLflow's
stores (`readers_mlflow`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from playground.diagnose.console_text import ANSI, MEGATRON, RAY_PREFIX, to_float
from playground.diagnose.endings import EndWatch
from playground.diagnose.readers_mlflow import is_file_store, is_sqlite, read_mlflow_files, read_mlflow_sqlite
from playground.diagnose.readers_wandb import holds_block, parse_wandb_text, read_wandb_block, read_wandb_csv
from playground.metrics import STEP, canonicalize
from playground.rundir.runs import METRICS, LogRead, ProblemLog, find_runs, is_run_dir, read_metrics_jsonl

# `step:N` where verl's console logger starts a line; whatever precedes it (a Ray or logging prefix, a tqdm
# bar without its newline) is ignored. The lookbehind keeps `training/global_step:3` from matching.
_STEP = re.compile(r"(?<![\w/@.\-])step:(\d+)(?=\s+-\s|\s*-?\s*$)")
# the steps the run was started for: verl's trainer prints it before training (ray_trainer.py, v1/trainer_base.py:
# `Total training steps: {self.total_training_steps}`)
_TOTAL_STEPS = re.compile(r"Total training steps: (\d+)")
_RAY_REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")
_COMMENT = re.compile(r"(?:^|\s)#.*$")  # the guide's examples annotate lines with `# ...`
_SEPARATOR = re.compile(r"\s+-\s+")  # ` - ` between pairs; a negative value is `key:-0.005`, no space
_PIECE = re.compile(r"[^\s:]+(?::(?:\S.*)?)?")  # key or key:value; pformat never puts a space after `:`
_EVENTS_GLOB = "events.out.tfevents.*"
# verl's validation keys: <val-core|val-aux>/<data_source>/<var>/<metric>; a data source may hold a `/`.


def _pieces(body: str) -> list[str]:
    """Split the text after `step:N` into `key:value` pieces."""
    text = re.sub(r"^-(?:\s+|$)", "", body.strip())
    text = re.sub(r"\s+-$", "", text)  # a line cut just after a separator
    return [p for p in _SEPARATOR.split(text) if p] if text else []


def _value(piece: str) -> float | None:
    _, sep, value = piece.partition(":")
    return to_float(value) if sep else None


def _count_numbers(pieces: list[str]) -> int:
    return sum(_value(p) is not None for p in pieces)


def _ends_with_separator(body: str) -> bool:
    body = body.rstrip()
    return body == "-" or body.endswith((" -", "\t-"))


def _join(body: str, line: str) -> str | None:
    """`body` with a continuation `line` appended, or None when `line` is not the rest of this step's metrics.

    A line that starts with whitespace or `- ` holds further pairs (the guide's multi-line layout, or a wrap at
    a separator). Any other line continues the last token (a terminal or log collector broke a long line):
    it is taken only if it completes a key or value and breaks no number already read, so log noise that
    follows a step line is not glued onto its last value.
    """
    stripped = line.strip()
    after_separator = _ends_with_separator(body)
    explicit = stripped.startswith("- ") or after_separator  # an explicit separator: surely more pairs
    if explicit or line[:1].isspace():
        new = re.sub(r"^-\s+", "", stripped)
        pieces = _pieces(new)
        if not pieces or not all(_PIECE.fullmatch(p) for p in pieces):
            return None
        if not explicit and _count_numbers(pieces) == 0:
            return None
        return body.rstrip() + (" " if after_separator else " - ") + new
    tail = body[body.rfind(" - ") + 1:]  # only the last pair can change; the rest of the body stays as read
    before, after = _pieces(tail), _pieces(tail + line.rstrip())
    start = max(len(before) - 1, 0)
    if not all(_PIECE.fullmatch(p) for p in after[start:]):
        return None
    if before:
        old, new_value = _value(before[-1]), _value(after[start])
        if old is not None and new_value is None:
            return None
        if old is not None and after[start] != before[-1]:
            return body + line.rstrip()  # a value broken in the middle: `0.12` + `345`
    return body + line.rstrip() if _count_numbers(after) > _count_numbers(before) else None


def _looks_like_fragment(line: str) -> bool:
    """A line of `key:value` pairs with at least one number: metrics whose `step:N` start is missing."""
    pieces = _pieces(line)
    if not pieces or not all(_PIECE.fullmatch(p) for p in pieces[1:]) or re.search(r"\s", pieces[0]):
        return False
    return _count_numbers(pieces) > 0


def _key_cut_before_step(body: str) -> bool:
    """True when a line ends in a key cut just before `step` (`training/global_` + `step:3 - ...`)."""
    pieces = _pieces(body)
    return bool(pieces) and ":" not in pieces[-1] and body.endswith(("/", "_"))


def _clean(segment: str) -> str:
    segment = ANSI.sub("", segment)
    segment = _RAY_REPEATED.sub("", segment)
    return _COMMENT.sub("", segment)


@dataclass
class _StepLine:
    step: int
    first: int  # line numbers, for problems
    last: int
    body: str  # the text after `step:N`, continuation lines joined on


class ConsoleParser:
    """Collects verl step lines (with their continuation lines) from a log's lines, in order."""

    def __init__(self, name: str):
        self.name = name
        self.log = ProblemLog()
        self.by_step: dict[int, dict[str, float]] = {}
        self._pending: _StepLine | None = None
        self.last_step_line = 0  # line number of the last step line
        self.ends = EndWatch()  # the lines since the last step line that say how the run ended (endings.yaml)
        self.megatron_line = 0  # the first line that names Megatron (its backend: the scale of kl_loss, grad_norm)
        self.total_steps: int | None = None  # trainer.total_training_steps, where the log prints it

    def _where(self, first: int, last: int | None = None) -> str:
        lines = f"line {first}" if last in (None, first) else f"lines {first}-{last}"
        return f"{self.name} {lines}" if self.name else lines

    @property
    def out_of_memory(self) -> bool:
        """The log ends, after its last step line, in a line that proves an out-of-memory error."""
        return self.ends.fields()["out_of_memory"]

    def feed(self, number: int, raw: str) -> None:
        if not self.megatron_line and MEGATRON.search(raw):
            self.megatron_line = number
        if total := _TOTAL_STEPS.search(raw):
            self.total_steps = int(total[1])
        segments = [s for s in raw.rstrip("\r\n").split("\r") if s.strip()]  # tqdm redraws with `\r`
        if not segments:
            self._finish()  # a wrapped line never contains a blank line
            return
        for segment in segments:
            line = _clean(segment)
            if line.strip():
                self._feed_line(number, line)

    def _feed_line(self, number: int, line: str) -> None:
        pending = self._pending
        match = _STEP.search(line)
        if match and not (pending and line.startswith("step:") and _key_cut_before_step(pending.body)):
            self._finish()
            self._pending = _StepLine(int(match[1]), number, number, line[match.end():])
            self.last_step_line = number
            self.ends.step_seen()
            return
        line = RAY_PREFIX.sub("", line, count=1)
        self.ends.feed(number, line)
        if pending is not None:
            joined = _join(pending.body, line)
            if joined is not None:
                pending.body, pending.last = joined, number
                return
            self._finish()
        if _looks_like_fragment(line):
            self.log.skip(self._where(number), "metrics without the `step:N` that starts their line",
                          f" (the excerpt starts or breaks mid-line?): {line.strip()[:80]!r}")

    def _finish(self) -> None:
        line, self._pending = self._pending, None
        if line is None:
            return
        where = self._where(line.first, line.last)
        record: dict[str, float] = {}
        for piece in _pieces(line.body):
            key, sep, text = piece.partition(":")
            if not _PIECE.fullmatch(piece) or not key:
                self.log.add(f"{where} (step {line.step}): not a `key:value` pair, skipped: {piece!r}", "pair")
            elif not sep or not text.strip():
                self.log.add(f"{where} (step {line.step}): `{key}` has no value (line cut off?), skipped",
                             ("no value", key))
            elif (value := to_float(text)) is not None:
                record[key] = value
            else:
                self.log.add(f"{where} (step {line.step}): `{key}` is not a number ({text.strip()[:40]!r}), skipped",
                             ("not a number", key))
        if record:
            self.by_step.setdefault(line.step, {}).update({**canonicalize(record), STEP: float(line.step)})

    def result(self, source: str) -> LogRead:
        self._finish()
        if not self.by_step and not self.log.lines:
            self.log.add(f"{self.name or 'text'}: no verl step lines (`step:N - key:value - ...`) found")
        records = [self.by_step[s] for s in sorted(self.by_step)]
        # a line after the last step line is how the run ended (endings.py); one followed by more steps was survived
        return LogRead(records=records, problems=self.log.lines, source=source, kind="verl_console",
                       skipped=self.log.skipped, megatron_line=self.megatron_line, total_steps=self.total_steps,
                       **self.ends.fields())


def _parse_lines(lines: Iterable[str], name: str, source: str) -> LogRead:
    parser = ConsoleParser(name)
    for number, raw in enumerate(lines, start=1):
        parser.feed(number, raw)
    return parser.result(source)


def parse_verl_text(text: str, *, name: str = "") -> LogRead:
    """Read verl console lines from a string (a pasted excerpt); see `read_verl_console_log`. Text that holds a
    wandb end-of-run block and no step lines is read as that block (`readers_wandb.parse_wandb_text`)."""
    lines = text.split("\n")
    if _wandb_only(lines):
        return parse_wandb_text(text, name=name)
    return _parse_lines(lines, name, name)


def _wandb_only(lines: list[str]) -> bool:
    """True for lines with a wandb end-of-run block and no verl step line: the step lines are exact, so they win."""
    return not any(_STEP.search(_clean(line)) for line in lines) and holds_block(lines)


def read_verl_console_log(source: str | Path | TextIO, *, name: str = "") -> LogRead:
    """Read the metrics verl's console logger printed (`step:N - key:value - ...`) from a log.

    Ray prefixes, colour codes, log noise, wrapped lines and the guide's multi-line examples are handled;
    every line or fragment that cannot be read is described in `problems`, never raised.

    Args:
        source: a log file's path, or an open text stream.
        name: how problems name the log (default: the file name).

    Returns:
        One record per step, canonical names, `training/global_step` = the line's `N`, sorted by step;
        lines of the same step are merged, later values winning.

    Raises:
        FileNotFoundError: `source` is a path with no file there.
    """
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(f"no log file at {path}" + (" (it is a directory)" if path.is_dir() else ""))
        with open(path, "rb") as f:  # split on \n only: a tqdm `\r` is not a new line number
            lines = (raw.decode("utf-8", errors="replace") for raw in f)
            return _parse_lines(lines, name or path.name, str(path))
    name = name or str(getattr(source, "name", ""))
    return _parse_lines(source, name, name)


def _read_event_scalars(path: Path, problems: list[str]) -> dict[int, dict[str, float]]:
    """Every scalar in one run's event files (a dir, or one file): step -> {tag: value}."""
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.util import tensor_util

    guidance = {ea.SCALARS: 0, ea.TENSORS: 0, ea.IMAGES: 1, ea.AUDIO: 1, ea.HISTOGRAMS: 1,
                ea.COMPRESSED_HISTOGRAMS: 1}
    by_step: dict[int, dict[str, float]] = {}
    try:
        acc = ea.EventAccumulator(str(path), size_guidance=guidance)
        acc.Reload()
        for tag in acc.Tags()[ea.SCALARS]:
            for event in acc.Scalars(tag):
                by_step.setdefault(event.step, {})[tag] = float(event.value)
        for tag in acc.Tags()[ea.TENSORS]:  # TF2-style scalars are stored as tensors of the scalars plugin
            if acc.SummaryMetadata(tag).plugin_data.plugin_name != "scalars":
                continue
            for event in acc.Tensors(tag):
                array = tensor_util.make_ndarray(event.tensor_proto)
                if array.size == 1:
                    by_step.setdefault(event.step, {})[tag] = float(array.reshape(-1)[0])
    except Exception as e:  # a corrupt or foreign file: say so, keep what was read
        problems.append(f"{path}: cannot read TensorBoard events ({type(e).__name__}: {e})")
        return by_step
    if not by_step:
        problems.append(f"{path}: no scalars in its TensorBoard events (not written yet, or not an event file?)")
    return by_step


def _event_dirs(root: Path) -> list[Path]:
    return sorted({p.parent for p in root.rglob(_EVENTS_GLOB) if p.is_file()})


def _newest(run: Path) -> tuple[float, str]:
    files = [run] if run.is_file() else list(run.glob(_EVENTS_GLOB))
    return max(f.stat().st_mtime for f in files), str(run)


def read_tensorboard(logdir: str | Path) -> LogRead:
    """Read the scalars of a TensorBoard log (verl: `tensorboard_log/<project>/<experiment>/events.out.tfevents.*`).

    `logdir` may be the dir holding the event files, any dir above it, or one event file. Several dirs with
    event files are merged by step when they log different tags (one run split over dirs); when they log the
    same tags they are different runs: the newest is read and `problems` names the others.

    Args:
        logdir: a dir or an event file.

    Returns:
        One record per step, tags mapped to canonical names, `training/global_step` = the event step.

    Raises:
        FileNotFoundError: nothing at `logdir`.
    """
    root = Path(logdir)
    if not root.exists():
        raise FileNotFoundError(f"no TensorBoard log at {root}")
    problems: list[str] = []
    runs = [root] if root.is_file() else _event_dirs(root)
    if not runs:
        problems.append(f"{root}: no TensorBoard event files ({_EVENTS_GLOB}) found")
    tables = [(run, _read_event_scalars(run, problems)) for run in runs]
    tags = [set().union(*table.values()) for _, table in tables]
    if any(tags[i] & tags[j] for i in range(len(tags)) for j in range(i + 1, len(tags))):
        newest = max(runs, key=_newest)
        others = ", ".join(str(r.relative_to(root)) for r in runs if r != newest)
        problems.append(f"{root}: {len(runs)} TensorBoard runs log the same metrics; read the newest, "
                        f"{newest.relative_to(root)}, not {others} (pass a run's own dir to read it)")
        tables = [(run, table) for run, table in tables if run == newest]
    merged: dict[int, dict[str, float]] = {}
    for _, table in tables:
        for step, values in table.items():
            merged.setdefault(step, {}).update(values)
    records = [{**canonicalize(merged[s]), STEP: float(s)} for s in sorted(merged)]
    return LogRead(records=records, problems=problems, source=str(root), kind="tensorboard")


def path_kind(path: Path) -> str:
    """What a path holds, for the readers and the diagnosis alike: "run" (a run dir, or its `metrics.jsonl`), "runs"
    (a dir with run dirs under it: a sweep), "tensorboard" (event files at any depth, or one), "jsonl" (a JSON-lines
    file: ours or verl's file logger), "csv" (a `.csv` file: a wandb chart's or history's export), "wandb_history"
    (a text file with wandb's end-of-run block and no verl step lines), "mlflow_sqlite" (an sqlite file: MLflow's
    store), "mlflow_files" (an MLflow file store, one of its experiments or runs), "console" (any other file: a verl
    console log) or "unknown" (a dir with none of these).

    Raises:
        FileNotFoundError: nothing at `path`.
    """
    if not path.exists():
        raise FileNotFoundError(f"nothing at {path}")
    if path.is_file():
        if path.name == METRICS:
            return "run"
        if path.suffix == ".jsonl":
            return "jsonl"
        if path.suffix.lower() == ".csv":
            return "csv"
        if path.name.startswith("events.out.tfevents."):
            return "tensorboard"
        if is_sqlite(path):
            return "mlflow_sqlite"
        text = path.read_bytes().decode("utf-8", errors="replace")
        return "wandb_history" if _wandb_only(text.split("\n")) else "console"
    if is_run_dir(path):
        return "run"
    if find_runs([path]):
        return "runs"
    if is_file_store(path):
        return "mlflow_files"
    return "tensorboard" if next(path.rglob(_EVENTS_GLOB), None) is not None else "unknown"


MLFLOW_KINDS = ("mlflow_sqlite", "mlflow_files")


def read_any(path: str | Path, run: str | None = None) -> LogRead:
    """Read one log's metrics from whatever `path` is (`path_kind`); a sweep's dir is not one log (see `problems`).
    `run` picks one run of an MLflow store by name or id (default: its newest).

    Raises:
        FileNotFoundError: nothing at `path`.
        ValueError: `run` given for a path that is not an MLflow store.
    """
    path = Path(path)
    kind = path_kind(path)
    if run is not None and kind not in MLFLOW_KINDS:
        raise ValueError(f"--run picks one run of an MLflow store; {path} is not one ({kind})")
    if kind in MLFLOW_KINDS:
        return read_mlflow_sqlite(path, run) if kind == "mlflow_sqlite" else read_mlflow_files(path, run)
    if kind == "run":
        return read_metrics_jsonl(path if path.is_file() else path / METRICS)
    if kind == "runs":
        return LogRead(records=[], source=str(path), problems=[
            f"{path}: holds {len(find_runs([path]))} runs, not one log; pass one run's dir"])
    if kind == "jsonl":
        return read_metrics_jsonl(path)
    if kind == "tensorboard":
        return read_tensorboard(path)
    if kind == "console":
        return read_verl_console_log(path)
    if kind in ("csv", "wandb_history"):
        return read_wandb_csv(path) if kind == "csv" else read_wandb_block(path)
    return LogRead(records=[], source=str(path), problems=[
        f"{path}: no {METRICS} and no TensorBoard event files here; pass a console log file itself"])
