"""The explorer's only file reader: cached wrappers over `playground.rundir.runs` and `playground.diagnose`.

A path the user types (a runs folder, a log, a run named in the URL) is read only if it resolves to a place
under the configured roots or the working directory; every other path comes from `list_runs` over those
roots. Caches are keyed by a file's (mtime, size), so a live run's new lines show on the next read; the run
list reads only `run.json` and `findings.json`, never metrics.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st
import yaml

from playground import RUNS_ENV
from playground.algos.clip_range import resolve_clip_range
from playground.diagnose import engine
from playground.diagnose.readers import parse_verl_text, read_any
from playground.diagnose.root_causes import chain, worst_severity
from playground.interrupts import STOPPED_BY_YOU
from playground.rundir.runs import (
    FINDINGS,
    METRICS,
    SAMPLES,
    TOKENS,
    LogRead,
    find_runs,
    metrics_record,
    read_findings,
    read_metrics_jsonl,
    read_run_info,
    read_samples,
    read_token_records,
)

from series import records_frame, smooth_ema

ENV_ROOTS = RUNS_ENV
DEFAULT_ROOTS = ("outputs", "multirun")
TTL_S = 2.0  # the run list is re-listed at most this often; metric files are re-read when they change
RUN_COLUMNS = ["run", "name", "root", "sweep", "job", "status", "task", "family", "scenario", "seed", "last_step",
               "total_steps", "start_time", "end_time", "mystery", "base", "overrides", "findings", "chain", "worst",
               "score_target", "has_info"]
Stamp = tuple[int, int]


# ---- roots and path checks ----

def configured_roots() -> list[Path]:
    """The roots from `PLAYGROUND_RUNS` (os.pathsep-separated), else `outputs/` and `multirun/` in the cwd."""
    env = os.environ.get(ENV_ROOTS, "")
    names = [p for p in env.split(os.pathsep) if p.strip()] or list(DEFAULT_ROOTS)
    return [Path(p).expanduser().resolve() for p in names]


def allowed_bases() -> list[Path]:
    """Where the app may read: the configured roots and the working directory (the repo)."""
    return [*configured_roots(), Path.cwd().resolve()]


def inside(path: str | Path, bases: list[Path]) -> Path | None:
    """`path` resolved (symlinks and `..` followed) if it lies under one of `bases`, else None."""
    try:
        resolved = Path(path).expanduser().resolve()
    except (OSError, RuntimeError, ValueError):
        return None
    return resolved if any(resolved.is_relative_to(b) for b in bases) else None


def _stamp(path: Path) -> Stamp | None:
    try:
        s = path.stat()
    except OSError:
        return None
    return s.st_mtime_ns, s.st_size


# ---- the run list ----

def _hydra_overrides(run_dir: Path) -> list[str]:
    try:
        with open(run_dir / ".hydra" / "overrides.yaml", encoding="utf-8") as f:
            items = yaml.safe_load(f)
    except (OSError, yaml.YAMLError):
        return []
    return [str(i) for i in items] if isinstance(items, list) else []


def pid_alive(pid: Any, started: Any = None) -> bool:
    """Whether process `pid` still runs and is the one that started at `started` (a reused pid started later)."""
    import psutil

    try:
        proc = psutil.Process(int(pid))
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return started is None or proc.create_time() <= float(started) + 1.0
    except (psutil.Error, TypeError, ValueError, OverflowError):
        return False


def run_status(info: dict[str, Any]) -> str:
    """run.json's status; "gone" for a run still marked running whose recorded process no longer exists (killed)."""
    status = str(info.get("status", "unknown"))
    if status == "running" and info.get("pid") is not None and not pid_alive(info["pid"], info.get("start_time")):
        return "gone"
    return status


def stopped_by_you(info: dict[str, Any]) -> bool:
    """An interrupted run its user stopped (Ctrl-C, the explorer's Stop): said as a stop, not as a failure."""
    return info.get("status") == "interrupted" and str(info.get("error") or "").startswith(STOPPED_BY_YOU)


def _run_row(run_dir: Path, root: Path, warnings: list[tuple[str, str]]) -> dict[str, Any]:
    info = read_run_info(run_dir)
    if info is None:
        warnings.append(("warn_no_run_json", str(run_dir)))
        info = {}
    report = read_findings(run_dir)
    if report is None and (run_dir / FINDINGS).exists():
        warnings.append(("warn_bad_findings", str(run_dir)))
    findings = [f for f in (report or {}).get("findings", []) if isinstance(f, dict)]
    worst = worst_severity(findings)
    in_sweep = (run_dir.parent / "multirun.yaml").is_file()
    mystery = bool(info.get("mystery")) and not info.get("solved")  # its findings stay hidden, even from sorting
    family = info.get("family") or ("token" if (run_dir / SAMPLES).is_file() else "")
    return {
        "run": str(run_dir), "name": str(Path(root.name) / run_dir.relative_to(root)), "root": str(root),
        "sweep": str(run_dir.parent) if in_sweep else "", "job": run_dir.name if in_sweep else "",
        "status": run_status(info) if info else "unknown", "task": info.get("task", ""), "family": family,
        "scenario": info.get("scenario", ""), "seed": info.get("seed"), "last_step": info.get("last_step"),
        "total_steps": info.get("total_steps"), "start_time": info.get("start_time"),
        "end_time": info.get("end_time"), "mystery": mystery,
        # a token run building its SFT base before its first step (playground.tasks.base_build): how far it is
        "base": info.get("base") if info.get("phase") == "sft_base" and info.get("status") == "running" else None,
        "overrides": list(info.get("overrides") or _hydra_overrides(run_dir)), "findings": findings,
        "chain": chain(report),
        "worst": "" if mystery else worst, "score_target": info.get("score_target"), "has_info": bool(info),
    }


@st.cache_data(ttl=TTL_S, show_spinner=False)
def list_runs(roots: tuple[str, ...]) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """Every run under the roots once, from `run.json` and `findings.json` only.

    A root that does not exist yet is no warning (`multirun/` before the first sweep). Roots may nest
    (`outputs/demo` and `outputs`): a run is listed once, named after the outermost root that holds it.

    Args:
        roots: resolved root dirs.

    Returns:
        (one row per run with RUN_COLUMNS, warnings as (message key, path) pairs for widgets.t).
    """
    warnings: list[tuple[str, str]] = []
    owner: dict[Path, Path] = {}  # run dir -> the outermost root it lies under
    for root in sorted({Path(r) for r in roots if Path(r).is_dir()}, key=lambda r: len(r.parts)):
        run_dirs = find_runs([root])
        if not run_dirs:
            warnings.append(("warn_root_empty", str(root)))
        for run_dir in run_dirs:
            owner.setdefault(run_dir, root)
    rows = [_run_row(run_dir, root, warnings) for run_dir, root in sorted(owner.items())
            if run_dir.is_dir()]  # it may be deleted between the walk and now
    return pd.DataFrame(rows, columns=RUN_COLUMNS), warnings


def missing_roots(roots: tuple[str, ...]) -> list[str]:
    """The roots not created yet (shown as such, not as a warning)."""
    return [r for r in roots if not Path(r).is_dir()]


# ---- one run's files ----

@st.cache_data(max_entries=512, show_spinner=False)
def _read_log(path: str, stamp: Stamp) -> LogRead:
    return read_metrics_jsonl(path)


def run_log(run: str) -> LogRead:
    """A run's metrics as read by `playground.rundir.runs` (records in step order, problems in words)."""
    path = Path(run) / METRICS
    stamp = _stamp(path)
    if stamp is None:  # a run starting (no run.json yet) or before its first step has none: nothing is wrong with it;
        info = run_info(run)  # a run whose folder is gone was deleted, and says so
        starting = Path(run).is_dir() and (not info or run_status(info) == "running")
        return LogRead(records=[], problems=[] if starting else [f"{path}: no such file (deleted, or not written yet)"],
                       source=str(path))
    return _read_log(str(path), stamp)


@st.cache_data(max_entries=512, show_spinner=False)
def _frame(path: str, stamp: Stamp) -> pd.DataFrame:
    return records_frame(_read_log(path, stamp).records)


def metrics_frame(run: str) -> pd.DataFrame:
    """A run's metrics as a frame (one row per record, in `run_log` order); empty when there is no file."""
    path = Path(run) / METRICS
    stamp = _stamp(path)
    return records_frame([]) if stamp is None else _frame(str(path), stamp)


def _tail_lines(path: Path, n: int) -> list[bytes]:
    """The last `n` complete lines of a file (a half-written last line is left out)."""
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        block, data = 8192, b""
        while size > 0 and data.count(b"\n") <= n:
            read = min(block, size)
            size -= read
            f.seek(size)
            data = f.read(read) + data
            block *= 2
    lines = data.split(b"\n")[:-1]
    return (lines[1:] if size > 0 else lines)[-n:]


@st.cache_data(max_entries=4096, show_spinner=False)
def _smoothed_last(path: str, stamp: Stamp, metric: str, weight: float, n: int) -> float | None:
    values = []
    for raw in _tail_lines(Path(path), n):
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict):
            value = metrics_record(obj).get(metric)
            if value is not None:
                values.append(value)
    return float(smooth_ema(values, weight)[-1]) if values else None


def smoothed_last(run: str, metric: str, weight: float, n: int) -> float | None:
    """The smoothed value of `metric` at a run's last record, from the file's last `n` lines only.

    Sorting 200 runs by it reads a few KB per run; `n = series.ema_window(weight)` makes the result equal to
    the full series' smoothed value up to the weight of the points left out.
    """
    path = Path(run) / METRICS
    stamp = _stamp(path)
    return None if stamp is None else _smoothed_last(str(path), stamp, metric, weight, n)


@st.cache_data(max_entries=256, show_spinner=False)
def _samples(path: str, stamp: Stamp) -> tuple[pd.DataFrame, list[str]]:
    rows, problems = read_samples(path)
    frame = pd.DataFrame(rows)
    for column in ("step", "prompt", "response", "reward", "truncated", "answer"):
        if column not in frame:
            frame[column] = None
    return frame, problems


def samples_frame(run: str) -> tuple[pd.DataFrame, list[str]]:
    """A token run's `samples.jsonl` (step, prompt, response, reward, truncated, answer); empty when absent."""
    path = Path(run) / SAMPLES
    stamp = _stamp(path)
    if stamp is None:
        return pd.DataFrame(columns=["step", "prompt", "response", "reward", "truncated", "answer"]), []
    return _samples(str(path), stamp)


@st.cache_data(max_entries=64, show_spinner=False)
def _token_records(path: str, stamp: Stamp) -> tuple[list[dict[str, Any]], list[str]]:
    return read_token_records(Path(path).parent)


def has_token_records(run: str) -> bool:
    return (Path(run) / TOKENS).is_file()


def token_records(run: str) -> tuple[list[dict[str, Any]], list[str]]:
    """A token run's per-token records (`tokens.jsonl`, every step), and the lines that could not be read; empty
    when the run has none."""
    path = Path(run) / TOKENS
    stamp = _stamp(path)
    return ([], []) if stamp is None else _token_records(str(path), stamp)


@st.cache_data(max_entries=256, show_spinner=False)
def _run_config(path: str, stamp: Stamp) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            config = yaml.safe_load(f)
    except (OSError, yaml.YAMLError):
        return {}
    return config if isinstance(config, dict) else {}


def run_config(run: str) -> dict[str, Any]:
    """The run's resolved config (`.hydra/config.yaml`), read again only when it changes; empty where it is not there
    or not readable."""
    path = Path(run) / ".hydra" / "config.yaml"
    stamp = _stamp(path)
    return {} if stamp is None else _run_config(str(path), stamp)


def clip_band(config: dict[str, Any]) -> tuple[float, float] | None:
    """A config's PPO clip band (1 − ε_low, 1 + ε_high); None where it has none."""
    actor = config.get("actor_rollout_ref", {}).get("actor", {})
    low, high = resolve_clip_range(actor.get("clip_ratio"), actor.get("clip_ratio_low"), actor.get("clip_ratio_high"))
    return None if low is None or high is None else (1 - float(low), 1 + float(high))


def run_info(run: str) -> dict[str, Any]:
    return read_run_info(run) or {}


# ---- diagnosis ----

@st.cache_data(max_entries=256, show_spinner=False)
def _engine(call: str, key: tuple, _records: list[dict[str, float]], info: dict | None, family: str | None
            ) -> tuple[dict | None, str | None]:
    try:
        if call == "diagnose":
            return engine.diagnose(_records, info=info, family=family).to_dict(), None
        return engine.step_status(_records, family=family, info=info), None
    except Exception as e:  # a bug in a rule, or a log it never met, must not take the explorer down
        return None, f"{type(e).__name__}: {e}"


def diagnose_records(log: LogRead, info: dict | None = None, family: str | None = None, key: Any = None,
                     report: bool = True) -> tuple[dict | None, dict | None, str | None]:
    """The engine on a log: (report dict, step_status, None), or Nones and why the diagnosis failed.

    Args:
        log: the metrics.
        info: the run's `run.json` (family, score_target, ...), if any.
        family: gym | token | llm; default from `info`.
        key: identifies the log for the cache (default: its source); its record count is added.
        report: False skips the diagnosis (the caller has `findings.json`) and returns only step_status.
    """
    key = (key or (log.source, log_digest(log)), len(log.records), json.dumps(info, sort_keys=True, default=str))
    status, why = _engine("step_status", key, log.records, info, family)
    if not report:
        return None, status, why
    diagnosis, why_report = _engine("diagnose", key, log.records, info, family)
    return diagnosis, status, why or why_report


def log_digest(log: LogRead) -> str:
    """A short digest of a log's records: two logs with one source name (pasted, re-uploaded) stay apart."""
    return hashlib.sha1(repr(log.records).encode()).hexdigest()[:16]


def run_diagnosis(run: str, report: bool = True) -> tuple[dict | None, dict | None, str | None]:
    """A run's findings report and per-step statuses.

    The report is `findings.json` once the engine has written it (the run ended); before that, the engine
    runs on the metrics so far. The step statuses always come from the engine. `report=False`: the statuses only
    (a live chart needs no report, and a running run has no `findings.json` to spare the engine).
    """
    info = run_info(run) or None
    if info is not None and info.get("status") == "running":  # a killed run is no longer training: "gone"
        info = {**info, "status": run_status(info)}
    written = read_findings(run) if report else None
    key = (run, _stamp(Path(run) / METRICS))
    diagnosis, status, why = diagnose_records(run_log(run), info, (info or {}).get("family"), key=key,
                                              report=report and written is None)
    return (written if written is not None else diagnosis), status, why


# ---- external logs ----

@st.cache_data(max_entries=32, show_spinner=False)
def _read_any(path: str, stamp: Stamp | None) -> LogRead:
    return read_any(path)


def read_log_path(text: str) -> tuple[LogRead | None, str | None]:
    """Read a verl console log, metrics.jsonl or TensorBoard dir at `text` (under the allowed bases only).

    Returns:
        (the log, None), or (None, a message key for widgets.t: "err_outside" or "err_missing").
    """
    path = inside(text.strip(), allowed_bases())
    if path is None:
        return None, "err_outside"
    if not path.exists():
        return None, "err_missing"
    if _in_unsolved_mystery(path):
        return None, "err_mystery"
    return _read_any(str(path), _stamp(path)), None


def _in_unsolved_mystery(path: Path) -> bool:
    """A workshop mystery run stays undiagnosed everywhere until `playground.exercise check` accepts its diagnosis."""
    for folder in (path, *path.parents):
        info = read_run_info(folder) if (folder / "run.json").is_file() else None
        if info is not None:
            return bool(info.get("mystery")) and not info.get("solved")
    return False


@st.cache_data(max_entries=32, show_spinner=False)
def read_log_text(text: str, name: str) -> LogRead:
    """Read an uploaded or pasted log: JSON lines when it starts with `{`, else verl console lines."""
    if text.lstrip().startswith("{"):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / (Path(name).name or "upload.jsonl")
            path.write_text(text, encoding="utf-8")
            log = read_metrics_jsonl(path)
        return dataclasses.replace(log, source=name)  # keeps what the reader counted
    return parse_verl_text(text, name=name)


# ---- workshop ----

@st.cache_data(ttl=TTL_S, show_spinner=False)
def _exercises(root: str) -> list[dict[str, Any]]:
    from playground.teach.workshop import load_all, public_view

    return [public_view(ex, Path(root)) for ex in load_all()]


def exercises() -> list[dict[str, Any]]:
    """The workshop's exercises as participants see them (`playground.teach.workshop.public_view`: no answers)."""
    from playground.teach.workshop import workshop_root

    return _exercises(str(workshop_root()))


def run_row(run: str) -> pd.DataFrame:
    """One run dir as a one-row runs table, for a run read directly (a workshop run, the Lab's)."""
    path = Path(run)
    return pd.DataFrame([_run_row(path, path.parent.parent, [])], columns=RUN_COLUMNS)


def run_row_columns() -> pd.DataFrame:
    """An empty runs table."""
    return pd.DataFrame(columns=[*RUN_COLUMNS, "label"])

