"""The run directory contract: `run.json`, `metrics.jsonl`, `samples.jsonl`, `tokens.jsonl`, `findings.json`.

`tokens.jsonl` (token tasks with `trainer.token_records.enable`; `step.token_records` writes it): one JSON object per
recorded response and step: `step`, `row` (its index in the step's batch), `uid` (its group), `prompt`, `answer`,
`response`, `tokens` (each response token's text, specials by name), `mask` (1: a token the loss trains on; 0: an
environment's reply in a multi-turn episode), `reward`, `group` (`rows`, `rewards`: the group's rows and their
rewards, which GRPO's advantage compares), per token `advantages`, `old_log_prob` and, where the step has them,
`ref_log_prob`, `rollout_log_prob`, `entropy` (the old log-prob pass's), `values`; and `updates`: for each
micro-batch of the actor's update that held the response (`micro`: its index in the update's order), per token
`log_ratio` (log π_θ/π_old, clamped to ±20 as the loss does), and with the vanilla PPO loss `clipped` and
`clipped_lower` (1 where the clip, or the dual clip, binds), and `entropy` where the update measured it. A run whose
file passed `trainer.token_records.max_mb` says so in run.json (`token_records_full_at`: the first step left out).

A run writes into its Hydra output dir. The trainer is the only writer; the diagnosis engine and the explorer
read these files (never the trainer), so everything here reads tolerantly: a half-written last line is not
there yet, a corrupt line is reported and skipped, a missing `run.json` is None.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from playground.metrics import STEP, canonicalize, from_json_value, to_json_value

RUN_INFO = "run.json"
METRICS = "metrics.jsonl"
SAMPLES = "samples.jsonl"
TOKENS = "tokens.jsonl"
# What the Step inspector colours a step's recorded tokens by; a focus adds "zero_adv" (the groups whose rewards were
# all alike, whose advantages GRPO zeroes).
TOKEN_QUANTITIES = ("advantage", "ratio", "clipped", "entropy", "kl", "mismatch")
TOKEN_FOCI = (*TOKEN_QUANTITIES, "zero_adv")
FINDINGS = "findings.json"
STATUSES = ("running", "finished", "diverged", "oom", "failed", "interrupted")
INFO_EVERY_S = 1.0  # run.json's last_step lags metrics.jsonl by at most this long while a run is running


@dataclass
class LogRead:
    """Metrics read from any source: one dict per step, canonical names, sorted by step."""

    records: list[dict[str, float]]
    problems: list[str] = field(default_factory=list)  # lines or files that could not be read, in words
    source: str = ""
    kind: str = "jsonl"  # jsonl | verl_console | tensorboard | csv | wandb_summary | wandb_history (coarse) | mlflow
    out_of_memory: bool = False  # a console log that ends, after its last step line, in an out-of-memory error
    # the line a console log ends in after its last step line ("ValueError: ...", "Killed", Ray's death message:
    # diagnose/endings.yaml), and what it tells: its form, and whether the cause is in it or only a candidate
    ended_with: str = ""
    ended_how: str = ""
    megatron_line: int = 0  # the first line of a console log that names Megatron (verl's backend), 0: none
    skipped: dict[str, int] = field(default_factory=dict)  # lines of a readable file left out: why -> how many
    unscaled: list[str] = field(default_factory=list)  # metrics whose values carry a shape, not a scale (wandb)
    selected: str = ""  # which run of a store holding several was read, in words (MLflow)
    total_steps: int | None = None  # the steps the run was started for, where the log says (verl's console log)

    @property
    def steps(self) -> list[int]:
        return [int(r[STEP]) for r in self.records]

    def skipped_note(self) -> str | None:
        """`skipped` in one sentence for a report's notes ("3 lines of metrics.jsonl skipped (not valid JSON)")."""
        total = sum(self.skipped.values())
        if not total:
            return None
        whys = list(self.skipped)
        why = whys[0] if len(whys) == 1 else ", ".join(f"{n} {w}" for w, n in self.skipped.items())
        name = Path(self.source).name or "the log"
        return f"{total} line{'s' if total > 1 else ''} of {name} skipped ({why})"


class ProblemLog:
    """A reader's problems in words, one line per kind: a kind seen again adds to its first line's count.

    A log with a thousand corrupt lines says so in one line, not a thousand; `skipped` counts the lines left out
    by why, for `LogRead.skipped`.
    """

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.skipped: dict[str, int] = {}
        self._kinds: dict[object, list] = {}  # kind -> [index in lines, first text, count]

    def add(self, text: str, kind: object = None) -> None:
        """One problem; `kind` (default: the text itself) says which others are the same problem."""
        kind = text if kind is None else kind
        entry = self._kinds.get(kind)
        if entry is None:
            self._kinds[kind] = [len(self.lines), text, 1]
            self.lines.append(text)
            return
        entry[2] += 1
        more = entry[2] - 1
        self.lines[entry[0]] = f"{entry[1]} (and on {more} more line{'s' if more > 1 else ''})"

    def skip(self, where: str, why: str, detail: str = "") -> None:
        """A line left out: "`where`: `why`[ detail], skipped", folded with the others skipped for `why`."""
        self.skipped[why] = self.skipped.get(why, 0) + 1
        self.add(f"{where}: {why}{detail}, skipped", kind=("skip", why))


def write_atomic(path: Path, write: Callable[[BinaryIO], Any]) -> None:
    """Replace `path` in one rename, so a reader sees the old or the new file, never half of one.

    `write(f)` writes the content to a binary file in `path`'s folder; if it raises, `path` is left as it was.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    """`data` as indented JSON in `path`, replaced atomically (`write_atomic`)."""
    text = json.dumps(jsonable(data), indent=1, allow_nan=False) + "\n"
    write_atomic(path, lambda f: f.write(text.encode("utf-8")))


def jsonable(value: Any) -> Any:
    """`value` with every non-finite float written as "NaN", "Infinity" or "-Infinity" (JSON has neither)."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, float):
        return to_json_value(value)
    return value


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class RunRecorder:
    """Writes one run's files as it goes: metrics flushed per step, `run.json` replaced atomically."""

    def __init__(self, run_dir: str | Path, info: Mapping[str, Any]):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.info: dict[str, Any] = {
            "status": "running", "last_step": 0, "start_time": time.time(), "end_time": None, "error": None,
            "pid": os.getpid(),  # a run still "running" whose process is gone was killed (the explorer says so)
            **info,
        }
        self._metrics = open(self.run_dir / METRICS, "a", encoding="utf-8")
        self._samples: TextIO | None = None  # opened by the first samples
        self._tokens: TextIO | None = None  # opened by the first token records
        self._info_written = 0.0
        self.update()

    def update(self, **fields: Any) -> None:
        self.info.update(fields)
        write_json_atomic(self.run_dir / RUN_INFO, self.info)
        self._info_written = time.monotonic()

    def log(self, record: Mapping[str, float]) -> None:
        """Append one step's metrics as one JSON line and flush it (NaN/Inf written as strings)."""
        line = json.dumps({k: to_json_value(float(v)) for k, v in record.items()}, allow_nan=False)
        self._metrics.write(line + "\n")
        self._metrics.flush()
        self.info["last_step"] = int(record.get(STEP, self.info["last_step"]))
        if time.monotonic() - self._info_written >= INFO_EVERY_S:  # a fast run rewrites run.json ~once a second
            self.update()

    def log_samples(self, samples: Iterable[Mapping[str, Any]]) -> None:
        if self._samples is None:
            self._samples = open(self.run_dir / SAMPLES, "a", encoding="utf-8")
        for sample in samples:
            self._samples.write(json.dumps(jsonable(sample), ensure_ascii=False, allow_nan=False) + "\n")
        self._samples.flush()

    def log_tokens(self, records: Iterable[Mapping[str, Any]]) -> int:
        """Append token records (`TOKENS`), one JSON line each; returns the bytes written."""
        if self._tokens is None:
            self._tokens = open(self.run_dir / TOKENS, "a", encoding="utf-8")
        lines = "".join(json.dumps(jsonable(r), ensure_ascii=False, allow_nan=False) + "\n" for r in records)
        self._tokens.write(lines)
        self._tokens.flush()
        return len(lines.encode())

    def finish(self, status: str, error: str | None = None, **fields: Any) -> None:
        if status not in STATUSES:
            raise ValueError(f"run status must be one of {STATUSES}, got {status!r}")
        self.close()
        self.update(status=status, error=error, end_time=time.time(), **fields)

    def close(self) -> None:
        for f in (self._metrics, self._samples, self._tokens):
            if f is not None and not f.closed:
                f.close()


def iter_jsonl(path: Path, problems: list[str]) -> Iterator[dict[str, Any]]:
    """Yield the JSON objects of a JSON-lines file; unreadable lines are described in `problems` (see `_jsonl`)."""
    log = ProblemLog()
    yield from (obj for _, obj in _jsonl(path, log))
    problems += log.lines


def _jsonl(path: Path, log: ProblemLog) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, JSON object) for each line of a JSON-lines file.

    A last line without its newline is still being written: it is skipped silently. Any other line that is
    not a JSON object is skipped and counted in `log`.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        log.add(f"{path}: cannot read ({e.strerror or e})")
        return
    lines = data.split(b"\n")
    if lines and lines[-1] != b"":
        lines = lines[:-1]  # half-written last line: not there yet
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            log.skip(f"{path.name} line {number}", "not valid JSON")
            continue
        if not isinstance(obj, dict):
            log.skip(f"{path.name} line {number}", "not a JSON object")
            continue
        yield number, obj


def metrics_record(obj: Mapping[str, Any]) -> dict[str, float]:
    """One `metrics.jsonl` object as a record: numbers only (NaN/Inf strings decoded), keys under the guide's names;
    verl's file logger writes `{"step": s, "data": {...}}`."""
    if "data" in obj and isinstance(obj["data"], dict):
        obj = {**obj["data"], STEP: obj.get("step", obj["data"].get(STEP))}
    record = {}
    for key, value in obj.items():
        number_value = from_json_value(value)
        if number_value is not None:
            record[key] = number_value
    return canonicalize(record)


def read_metrics_jsonl(path: str | Path) -> LogRead:
    """Read a `metrics.jsonl` (ours, or verl's file logger's `{"step": s, "data": {...}}` lines)."""
    path = Path(path)
    log = ProblemLog()
    by_step: dict[int, dict[str, float]] = {}
    for number, obj in _jsonl(path, log):
        record = metrics_record(obj)
        step = record.get(STEP)
        if step is None or not math.isfinite(step):
            log.skip(f"{path.name} line {number}", f"no {STEP}")
            continue
        by_step.setdefault(int(step), {}).update(record)
    records = [by_step[s] for s in sorted(by_step)]
    return LogRead(records=records, problems=log.lines, source=str(path), kind="jsonl", skipped=log.skipped)


def read_samples(path: str | Path) -> tuple[list[dict[str, Any]], list[str]]:
    problems: list[str] = []
    return list(iter_jsonl(Path(path), problems)), problems


def read_token_records(run_dir: str | Path, step: int | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """A run's token records (`TOKENS`; only `step`'s when given), non-finite values back as floats, and the lines
    that could not be read."""
    problems: list[str] = []
    path = Path(run_dir) / TOKENS
    if not path.is_file():
        return [], problems
    records = [_finite_back(r) for r in iter_jsonl(path, problems) if step is None or r.get("step") == step]
    return records, problems


# The token records' numbers (one per token, or one per record), which `jsonable` wrote non-finite as strings.
TOKEN_NUMBERS = frozenset({"reward", "rewards", "advantages", "old_log_prob", "ref_log_prob", "rollout_log_prob",
                           "entropy", "values", "log_ratio"})


def _finite_back(record: dict[str, Any]) -> dict[str, Any]:
    """A token record with `jsonable`'s "NaN"/"Infinity" strings back as floats in its numbers."""
    out: dict[str, Any] = {}
    for key, value in record.items():
        if isinstance(value, dict):
            value = _finite_back(value)
        elif key == "updates":
            value = [_finite_back(u) for u in value]
        elif key in TOKEN_NUMBERS:
            value = [from_json_value(v) for v in value] if isinstance(value, list) else from_json_value(value)
        out[key] = value
    return out


def read_run_info(run_dir: str | Path) -> dict[str, Any] | None:
    return read_json(Path(run_dir) / RUN_INFO)


def write_findings(run_dir: str | Path, findings: Mapping[str, Any]) -> None:
    write_json_atomic(Path(run_dir) / FINDINGS, findings)


def read_findings(run_dir: str | Path) -> dict[str, Any] | None:
    return read_json(Path(run_dir) / FINDINGS)


def is_run_dir(path: Path) -> bool:
    return (path / METRICS).is_file() or (path / RUN_INFO).is_file()


def find_runs(roots: Iterable[str | Path], max_depth: int = 6) -> list[Path]:
    """Every run dir under the roots (a dir holding `run.json` or `metrics.jsonl`), sorted by path."""
    found: set[Path] = set()
    for root in roots:
        root = Path(root)
        if not root.is_dir():
            continue
        base_depth = len(root.parts)
        for dirpath, dirnames, _ in os.walk(root):
            path = Path(dirpath)
            if is_run_dir(path):
                found.add(path)
                dirnames[:] = []  # a run dir holds no runs
            elif len(path.parts) - base_depth >= max_depth:
                dirnames[:] = []
            else:
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
    return sorted(found)
