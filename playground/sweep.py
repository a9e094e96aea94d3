"""A sweep told from its jobs' run dirs: while it trains, a progress line now and then (steps done of the total, runs
finished, time left); once it has, where it went, each job's swept values, verdict and score, and the command that
opens it in the explorer. `hydra/launcher=batched` prints both; `benchmarks.sweep_maps` reads the same rows
(`job_rows`), and the explorer's sweep map the same verdicts (`root_causes.job_verdict`) and scores (`rundir.score`).

Progress is read from each job's `run.json` (`last_step`, `status`), which the run rewrites about once a second, so a
batch of agents and a job that runs alone are followed alike, and nothing is added to the training loop.
"""

from __future__ import annotations

import math
import shlex
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TextIO

import yaml

from playground import RUNS_ENV, STREAMLIT
from playground.config.overrides import key_values
from playground.diagnose.root_causes import chain, job_verdict
from playground.metrics import fmt
from playground.rundir.runs import FINDINGS, METRICS, find_runs, read_findings, read_metrics_jsonl, read_run_info
from playground.rundir.score import records_score, score_metric

PROGRESS_FRACTION = 0.1  # a line each time another tenth of the sweep's steps is done ...
PROGRESS_GAP_S = 30.0  # ... or after this long without one, whichever comes first
POLL_S = 1.0  # how often the run dirs are read
MISSING = "—"  # a key a job's overrides lack, a score a run does not have


def clock(seconds: float) -> str:
    """`4:05`, `1:02:03`: a duration as a clock reads it."""
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class SweepProgress:
    """How far a sweep's jobs are, from their run dirs.

    Args:
        run_dirs: the jobs' output dirs. totals: each job's `trainer.total_training_steps`.
        since: when the sweep started (`time.time()`); a `run.json` older than that is an earlier sweep's, not read.
    """

    def __init__(self, run_dirs: Sequence[str | Path], totals: Sequence[int], since: float):
        self.run_dirs, self.totals, self.since = [Path(d) for d in run_dirs], [int(t) for t in totals], since
        self.width = len(str(sum(self.totals)))

    def read(self) -> tuple[int, int]:
        """(steps done, runs done); a run that ended early (diverged, stopped on its score) counts all its steps:
        it has none left to train."""
        done = ended = 0
        for run_dir, total in zip(self.run_dirs, self.totals):
            info = read_run_info(run_dir) or {}
            if float(info.get("start_time") or 0.0) < self.since:
                continue
            if info.get("status", "running") == "running":
                done += min(int(info.get("last_step") or 0), total)
            else:
                done, ended = done + total, ended + 1
        return done, ended

    def line(self, done: int, ended: int, elapsed: float) -> str:
        """`sweep  40 % |  576/1440 steps |  0/18 runs done | 2:10 elapsed, ~3:15 left`."""
        total, runs = sum(self.totals), len(self.run_dirs)
        percent = 100 * done // total if total else 100
        parts = [f"sweep {percent:3d} %", f"{done:>{self.width}}/{total} steps",
                 f"{ended:>{len(str(runs))}}/{runs} runs done"]
        if done >= total:
            return " | ".join([*parts, f"{clock(elapsed)} in all"])
        left = f"~{clock(elapsed * (total - done) / done)} left" if done else "time left: after the first steps"
        return " | ".join([*parts, f"{clock(elapsed)} elapsed, {left}"])


class ProgressPrinter:
    """Prints `SweepProgress` lines from a thread while the sweep trains (`with ProgressPrinter(...):`): one each
    time another `PROGRESS_FRACTION` of the steps is done or `PROGRESS_GAP_S` after the last, and a last one as the
    sweep ends. Plain lines, flushed: a terminal, a log file and a CI log show the same."""

    def __init__(self, progress: SweepProgress, stream: TextIO | None = None, poll_s: float = POLL_S):
        self.progress, self.stream, self.poll_s = progress, stream, poll_s
        self.shown: tuple[int, int] | None = None  # (done, ended) of the last line printed
        self.shown_at = time.time()  # times are wall clock, from the sweep's start (`SweepProgress.since`)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="sweep-progress", daemon=True)

    def due(self, done: int, now: float) -> bool:
        """Whether a line is due: another tenth of the steps since the last line, or a long wait without one."""
        total = sum(self.progress.totals)
        last = self.shown[0] if self.shown else 0
        return (total > 0 and (done - last) >= PROGRESS_FRACTION * total) or now - self.shown_at >= PROGRESS_GAP_S

    def _print(self, done: int, ended: int, now: float) -> None:
        print(self.progress.line(done, ended, now - self.progress.since), file=self.stream or sys.stdout, flush=True)
        self.shown, self.shown_at = (done, ended), now

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_s):
            done, ended = self.progress.read()
            now = time.time()
            if self.due(done, now):
                self._print(done, ended, now)

    def __enter__(self) -> ProgressPrinter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        done, ended = self.progress.read()
        if (done, ended) != self.shown:
            self._print(done, ended, time.time())


# ---- the summary ----------------------------------------------------------------------------------------------------
def _overrides(run_dir: Path, info: dict) -> list[str]:
    if info.get("overrides"):
        return [str(o) for o in info["overrides"]]
    try:
        items = yaml.safe_load((run_dir / ".hydra" / "overrides.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return []
    return [str(i) for i in items] if isinstance(items, list) else []


def job_dirs(sweep: str | Path) -> list[Path]:
    """A Hydra multirun dir's jobs: the numbered run dirs right under it, in job order."""
    sweep = Path(sweep)
    runs = [r for r in find_runs([sweep], max_depth=1) if r.parent == sweep and r.name.isdigit()]
    return sorted(runs, key=lambda r: int(r.name))


def job_rows(run_dirs: Iterable[Path]) -> tuple[list[dict], list[dict]]:
    """The jobs as `sweep_map.sweep_jobs` rows (run, label, job, overrides, score (NaN before it has one), chain,
    status, mystery), in the order given; and their run.json contents."""
    rows, infos = [], []
    for run_dir in run_dirs:
        info = read_run_info(run_dir) or {}
        records = read_metrics_jsonl(run_dir / METRICS).records
        score = records_score(records, info)
        rows.append({"run": str(run_dir), "label": run_dir.name, "job": run_dir.name,
                     "overrides": _overrides(run_dir, info), "score": math.nan if score is None else score,
                     "score_metric": score_metric(info, {key for r in records for key in r}),
                     "chain": chain(read_findings(run_dir)), "status": info.get("status", "unknown"),
                     "mystery": bool(info.get("mystery")) and not info.get("solved")})
        infos.append(info)
    return rows, infos


def swept_keys(overrides: Iterable[Iterable[str]]) -> list[str]:
    """The override keys whose value differs between jobs (a key some jobs lack counts as differing), in the order
    they first appear."""
    values = [key_values(o) for o in overrides]
    keys = list(dict.fromkeys(key for v in values for key in v))
    return [key for key in keys if len({v.get(key, MISSING) for v in values}) > 1]


def _short_names(keys: Sequence[str]) -> list[str]:
    """`actor_rollout_ref.actor.optim.lr` -> `lr`, unless two keys would share a name."""
    short = [key.rsplit(".", 1)[-1] for key in keys]
    return [s if short.count(s) == 1 else key for s, key in zip(short, keys)]


def explorer_command(sweep: str | Path) -> str:
    """The command that opens the explorer on this sweep alone (its Sweeps page maps it)."""
    return f"{RUNS_ENV}={shlex.quote(str(sweep))} {STREAMLIT} run app"


def table(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]) -> list[str]:
    """Aligned columns, two spaces apart; `right`: which columns align right (numbers)."""
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows)]
    return ["  ".join(str(c).rjust(w) if r else str(c).ljust(w) for c, w, r in zip(line, widths, right)).rstrip()
            for line in (header, *rows)]


def summary_lines(sweep: str | Path, run_dirs: Sequence[Path], seconds: float) -> list[str]:
    """Where the sweep went, one row per job (its swept values, how it ended where not `finished`, the diagnosis's
    verdict and the score) and the command that opens it in the explorer."""
    rows, _ = job_rows(run_dirs)
    keys = swept_keys(row["overrides"] for row in rows)
    values = [key_values(row["overrides"]) for row in rows]
    show_status = any(row["status"] != "finished" for row in rows)
    metrics = sorted({row["score_metric"] for row in rows if math.isfinite(row["score"])})
    header = ["job", *_short_names(keys), *(["status"] if show_status else []), "verdict",
              metrics[0] if len(metrics) == 1 else "score"]
    body = []
    for row, value in zip(rows, values):
        verdict, _ = job_verdict(row["chain"], str(row["status"]), row["mystery"])
        if not (Path(row["run"]) / FINDINGS).is_file():  # a job that failed before it trained: no diagnosis
            verdict = MISSING
        score = row["score"]
        body.append([row["job"], *(value.get(key, MISSING) for key in keys),
                     *([row["status"]] if show_status else []), verdict,
                     fmt(score) if math.isfinite(score) else MISSING])
    right = [True, *(all(_is_number(v[k]) for v in values if k in v) for k in keys),
             *([False] if show_status else []), False, True]
    runs = f"{len(rows)} run{'s' * (len(rows) != 1)}"
    return [f"sweep done: {runs} in {clock(seconds)}, in {sweep}", "",
            *("  " + line for line in table(header, body, right)), "",
            f"explore: {explorer_command(sweep)}   (Sweeps page)"]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def print_summary(sweep: str | Path, run_dirs: Sequence[Path], seconds: float, stream: TextIO | None = None) -> None:
    print("\n".join(summary_lines(sweep, run_dirs, seconds)), file=stream or sys.stdout, flush=True)

