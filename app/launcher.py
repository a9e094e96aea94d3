"""The explorer's processes: the runs, sweeps and exercise checks it starts, a queue, and the checks before each.

The explorer launches nothing but the playground's own entries, `python -m playground.train` (one run, or a Hydra
multirun with the batched launcher) and `python -m playground.exercise`, each as an argument list (no shell) in a
session of its own, and only into folders it names itself under its runs folder (`runs_folder`) or the workshop
root. Overrides come from the pages' knobs or a finding's fix; `check_override` refuses any that could choose where
a run writes (`hydra.*`, `PLAYGROUND_*`, paths, interpolations) with one line, before anything starts.

`PLAYGROUND_MAX_RUNS` (default 1) processes run at once; the rest wait in a queue. Stop gives a process SIGINT, as
Ctrl-C would (the trainer records `interrupted`, stopped by you, and keeps its metrics); when the explorer exits it
stops what it started with SIGTERM, and a process it started outlives a killed explorer, which finds it again through
the pid in `run.json`.
"""

from __future__ import annotations

import atexit
import itertools
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import streamlit as st

from playground import PYTHON
from playground.config.overrides import parse as parse_override
from playground.teach.workshop import workshop_root

import data

ROOT = Path(__file__).resolve().parents[1]
ENV_MAX = "PLAYGROUND_MAX_RUNS"
TRAIN = ("-m", "playground.train")
EXERCISE = ("-m", "playground.exercise")
# Hydra config groups: a fix changes config keys, never which files compose the config.
GROUPS = ("task", "scenario", "scenario_task", "preset", "debug", "sweep")
# Keys that send data elsewhere than the run dir (a logging service) or pick another base model (its cache).
NOT_FROM_PAGES = ("trainer.logger", "trainer.wandb_mode", "trainer.project_name", "trainer.experiment_name", "sft")
# A sweep's agents share one torch thread: on a laptop the page (and the user) keep the other cores.
SWEEP = ("hydra/launcher=batched", "hydra.launcher.num_threads=1")
STOP_WAIT_S = 10.0
PUMP_S = 0.3
PLAIN_PATH = re.compile(r"^[A-Za-z0-9_./-]+$")


class Refused(ValueError):
    """An override or a folder the explorer will not pass on; the message is one line."""


# ---- where the explorer writes ----

def runs_folder() -> Path:
    """Where the explorer's runs and sweeps go: the first runs folder (`PLAYGROUND_RUNS`, default `outputs/`)."""
    return data.configured_roots()[0]


def write_roots() -> list[Path]:
    """The only folders the explorer writes under: its runs folder and the workshop's root."""
    return [runs_folder(), workshop_root().resolve()]


def checked_folder(path: str | Path) -> Path:
    """`path` resolved, if it lies under a write root; else Refused."""
    resolved = data.inside(path, write_roots())
    if resolved is None:
        raise Refused(f"{path} is outside the folders the explorer writes to ({', '.join(map(str, write_roots()))})")
    return resolved


def new_folder(kind: str, name: str) -> Path:
    """A fresh folder `<runs folder>/<kind>/<date>/<time>-<name>` (created), e.g. lab/2026-12-01/09-30-05-cartpole."""
    now = datetime.now()
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-") or "run"
    base = runs_folder() / kind / now.strftime("%Y-%m-%d")
    for n in itertools.count(1):
        path = checked_folder(base / (f"{now:%H-%M-%S}-{slug}" + (f"-{n}" if n > 1 else "")))
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            continue
    raise AssertionError("unreachable")


# ---- what the explorer passes on ----

def _under(key: str, prefixes: Sequence[str]) -> bool:
    return any(key == p or key.startswith((p + ".", p + "/")) for p in prefixes)


def check_override(item: str, allowed_keys: Collection[str] | None = None) -> str:
    """`item` (key=value) if the explorer may pass it to the trainer; else Refused, in one line.

    Args:
        allowed_keys: the keys a page offers (its knobs, `task`, `scenario`); None for a fix's overrides, which may
            set any ordinary config key (composing them then finds a key that does not exist).
    """
    override = parse_override(item)
    text, key, value = override.text, override.key, override.value or ""
    if "PLAYGROUND_" in text.upper():
        raise Refused(f"{text} is refused: PLAYGROUND_* settings are the explorer's, set where it starts")
    if _under(key, ("hydra",)):
        raise Refused(f"{text} is refused: where a run writes is the explorer's choice (under {runs_folder()})")
    if not override.plain or override.package or not re.fullmatch(r"[A-Za-z0-9_.]+", key):
        raise Refused(f"{text} is refused: write key=value with an existing config key")
    if "$" in value or "/" in value or "\\" in value or ".." in value:
        raise Refused(f"{text} is refused: a value may not be a path or an interpolation")
    if "," in value and not (value.startswith("[") and value.endswith("]")):
        raise Refused(f"{text} is refused: one value per key (start a sweep on the Sweeps page)")
    if allowed_keys is not None:
        if key not in allowed_keys:
            raise Refused(f"{text} is refused: {key} is not a knob of this page")
    elif _under(key, GROUPS) or _under(key, NOT_FROM_PAGES):
        raise Refused(f"{text} is refused: a fix changes training knobs, not {key}")
    return text


def check_overrides(items: Sequence[str], allowed_keys: Collection[str] | None = None) -> list[str]:
    return [check_override(i, allowed_keys) for i in items]


def fix_overrides(fix: str) -> list[str]:
    """A finding's or a participant's fix (space-separated key=value) as checked overrides; Refused otherwise."""
    try:
        items = shlex.split(fix)
    except ValueError as error:
        raise Refused(f"the fix does not parse ({error}): write key=value pairs") from None
    if not items:
        raise Refused("the fix is empty: write key=value pairs")
    return check_overrides(items)


def _dir_override(key: str, path: Path) -> str:
    text = str(path)
    if not PLAIN_PATH.match(text):
        if "'" in text or "\\" in text:
            raise Refused(f"{text}: a folder name with quotes or backslashes cannot be passed to Hydra")
        text = f"'{text}'"
    return f"{key}={text}"


def train_argv(overrides: Sequence[str], run_dir: Path) -> list[str]:
    """`python -m playground.train <overrides> hydra.run.dir=<run dir>`."""
    return [sys.executable, *TRAIN, *overrides, _dir_override("hydra.run.dir", checked_folder(run_dir))]


def sweep_argv(overrides: Sequence[str], params: Mapping[str, Sequence[str]], sweep_dir: Path) -> list[str]:
    """`python -m playground.train -m hydra/launcher=batched <overrides> key=a,b ... hydra.sweep.dir=<dir>`."""
    swept = [f"{key}={','.join(values)}" for key, values in params.items()]
    return [sys.executable, *TRAIN, "-m", *SWEEP, *overrides, *swept,
            _dir_override("hydra.sweep.dir", checked_folder(sweep_dir))]


def exercise_argv(args: Sequence[str], lang: str) -> list[str]:
    """`python -m playground.exercise --runs <workshop root> --lang <lang> <args>`."""
    return [sys.executable, *EXERCISE, "--runs", str(checked_folder(workshop_root())), "--lang", lang, *args]


def run_now(argv: list[str], timeout_s: float = 120.0) -> tuple[int, str]:
    """Run an exercise command that trains nothing (a diagnosis check) and wait: (exit code, what it printed)."""
    if argv[:1] != [sys.executable] or tuple(argv[1:3]) != EXERCISE:
        raise Refused(f"{shlex.join(argv[:3])}: only python -m playground.exercise runs without the queue")
    try:
        out = subprocess.run(argv, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return 124, f"no answer within {timeout_s:.0f} s"
    return out.returncode, out.stdout + out.stderr


def shown_path(path: str | Path) -> str:
    """A path as a user reads it: relative to the working directory when it lies under it."""
    path = Path(path)
    try:
        return str(path.relative_to(Path.cwd().resolve())) if path.is_absolute() else str(path)
    except ValueError:
        return str(path)


def shown_command(argv: Sequence[str]) -> str:
    """The command as a fresh terminal in the checkout takes it: the venv's `.venv/bin/python` (`playground.PYTHON`),
    and paths relative to the working directory."""

    def short(arg: str) -> str:
        override = parse_override(arg)
        if override.value is None:
            return shown_path(arg) if Path(arg).is_absolute() else arg
        value = override.value.strip(chr(39))
        return f"{arg[:len(arg) - len(override.value) - 1]}={shown_path(value)}" if Path(value).is_absolute() else arg

    words = [PYTHON, *(short(a) for a in argv[1:])] if argv and argv[0] == sys.executable else list(argv)
    return shlex.join(words)


# ---- the process table ----

@dataclass
class Job:
    """One process the explorer starts: queued, then running, then done, stopped or cancelled."""

    id: str
    kind: str  # train | sweep | start (an exercise's run) | check (an exercise's check, with a fix run)
    label: str
    argv: list[str]
    out: Path  # the folder it writes (a run dir, a sweep dir, an exercise's folder)
    log: Path  # its stdout and stderr
    state: str = "queued"
    pid: int | None = None
    returncode: int | None = None
    submitted: float = field(default_factory=time.time)
    started: float | None = None
    ended: float | None = None
    stopping: bool = False

    @property
    def active(self) -> bool:
        return self.state in ("queued", "running")

    @property
    def command(self) -> str:
        return shown_command(self.argv)

    def output(self, tail: int = 4000) -> str:
        """The last `tail` characters of what the process printed."""
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")[-tail:]
        except OSError:
            return ""


def max_running() -> int:
    """`PLAYGROUND_MAX_RUNS`: how many processes may train at once (default 1; a bad value counts as 1)."""
    try:
        return max(1, int(os.environ.get(ENV_MAX, "1")))
    except ValueError:
        return 1


class Launcher:
    """The queue and the processes of one explorer; thread-safe (every session of the server shares it).

    Args:
        limit: processes at once (default `max_running()`).
        spawn: starts a process (`subprocess.Popen`'s signature; tests pass a fake).
    """

    def __init__(self, limit: int | None = None, spawn: Callable[..., subprocess.Popen] = subprocess.Popen):
        self.limit = limit or max_running()
        self._spawn = spawn
        self._jobs: list[Job] = []
        self._procs: dict[str, subprocess.Popen] = {}
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self._closed = False

    # -- submitting --
    def submit(self, kind: str, label: str, argv: list[str], out: Path, log: Path) -> Job:
        """Queue one of the playground's entries (built by `train_argv`, `sweep_argv` or `exercise_argv`)."""
        if argv[:1] != [sys.executable] or tuple(argv[1:3]) not in (TRAIN, EXERCISE):
            raise Refused(f"{shlex.join(argv[:3])}: the explorer starts only python -m playground.train|exercise")
        checked_folder(out)
        checked_folder(log)
        with self._lock:
            job = Job(f"j{next(self._ids)}", kind, label, list(argv), Path(out), Path(log))
            self._jobs.append(job)
        self.pump()
        return job

    # -- reading --
    def jobs(self) -> list[Job]:
        self.pump()
        with self._lock:
            return list(self._jobs)

    def job_for(self, folder: str | Path, kinds: Collection[str] | None = None) -> Job | None:
        """The newest job (of `kinds`, default any) that writes `folder` or the folder above it (a sweep's)."""
        path = Path(folder)
        for job in reversed(self.jobs()):
            if (kinds is None or job.kind in kinds) and path.is_relative_to(job.out):
                return job
        return None

    def position(self, job: Job) -> int:
        """1 for the next job to start, 2 for the one after, ...; 0 when it is not waiting."""
        waiting = [j.id for j in self.jobs() if j.state == "queued"]
        return waiting.index(job.id) + 1 if job.id in waiting else 0

    # -- running --
    def pump(self) -> None:
        """Reap processes that ended and start waiting jobs while there is room."""
        with self._lock:
            for job in self._jobs:
                proc = self._procs.get(job.id)
                if job.state == "running" and proc is not None and proc.poll() is not None:
                    job.returncode, job.ended = proc.returncode, time.time()
                    job.state = "stopped" if job.stopping else "done"
                    del self._procs[job.id]
            if self._closed:
                return
            running = sum(j.state == "running" for j in self._jobs)
            for job in self._jobs:
                if running >= self.limit:
                    break
                if job.state == "queued":
                    self._start(job)
                    running += 1

    def _start(self, job: Job) -> None:
        job.log.parent.mkdir(parents=True, exist_ok=True)
        with open(job.log, "ab") as log:
            try:
                proc = self._spawn(job.argv, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"},
                                   stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)  # its own process group: Ctrl-C here is not its stop
            except OSError as error:
                log.write(f"could not start: {error}\n".encode())
                job.state, job.ended = "done", time.time()
                return
        self._procs[job.id] = proc
        job.state, job.pid, job.started = "running", proc.pid, time.time()

    def stop(self, job_id: str) -> None:
        """Cancel a waiting job, or stop a running one as Ctrl-C does (SIGINT: the run records `interrupted`, stopped by
        you, its metrics kept)."""
        with self._lock:
            job = next((j for j in self._jobs if j.id == job_id), None)
            if job is None:
                return
            if job.state == "queued":
                job.state, job.ended = "cancelled", time.time()
            elif job.state == "running":
                job.stopping = True
                _signal_group(job.pid, signal.SIGINT)

    def shutdown(self) -> None:
        """The explorer is exiting: drop the queue, stop every running process, and wait for them (then SIGKILL)."""
        with self._lock:
            self._closed = True
            for job in self._jobs:
                if job.state == "queued":
                    job.state = "cancelled"
                elif job.state == "running" and not job.stopping:  # one being stopped ends as its Stop says
                    job.stopping = True
                    _signal_group(job.pid, signal.SIGTERM)
            procs = list(self._procs.values())
        deadline = time.monotonic() + STOP_WAIT_S
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
        self.pump()

    def run_forever(self) -> None:
        """Advance the queue in the background, whether or not a page is open."""
        while not self._closed:
            self.pump()
            time.sleep(PUMP_S)


def _signal_group(pid: int | None, sig: int) -> None:
    if pid is None:
        return
    try:
        os.killpg(pid, sig)  # the process and what it started (an exercise's own training process)
    except (ProcessLookupError, PermissionError):
        pass


def stop_adopted(info: dict) -> bool:
    """Stop a run that an earlier explorer started (its pid in run.json), if that pid is still the trainer: SIGINT,
    as `Launcher.stop`."""
    pid = info.get("pid")
    if pid is None or not data.pid_alive(pid, info.get("start_time")):
        return False
    import psutil

    try:
        cmdline = " ".join(psutil.Process(int(pid)).cmdline())
    except (psutil.Error, ValueError):
        return False
    if "playground.train" not in cmdline and "playground.exercise" not in cmdline:
        return False
    os.kill(int(pid), signal.SIGINT)
    return True


@st.cache_resource(show_spinner=False)
def _shared_launcher() -> Launcher:
    launcher = Launcher()
    atexit.register(launcher.shutdown)
    threading.Thread(target=launcher.run_forever, name="playground-launcher", daemon=True).start()
    return launcher


def shared() -> Launcher:
    """The server's one launcher (shared by every session; stopped with the server)."""
    return _shared_launcher()
