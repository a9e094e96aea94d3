"""Diagnose what a user points at: a run dir (writing its `findings.json`), any reader's `LogRead` (console logs,
TensorBoard, wandb blocks and CSVs), or a path that is either, or a multirun dir of runs. The rules themselves run in
`engine`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from playground.diagnose import onset
from playground.diagnose.engine import Report, diagnose, findings_document, plain_config
from playground.metric_names import ENTROPY, ENTROPY_LOSS, KL_LOSS, PG_LOSS

if TYPE_CHECKING:
    from playground.rundir.runs import LogRead


def read_config(run_dir: Path) -> dict | None:
    """The run's `.hydra/config.yaml`, interpolations resolved where they can be."""
    path = run_dir / ".hydra" / "config.yaml"
    if not path.is_file():
        return None
    from omegaconf import OmegaConf

    try:
        return plain_config(OmegaConf.load(path))
    except Exception:  # noqa: BLE001 - an unreadable config only costs the fixes their current values
        return None


def diagnose_run_dir(run_dir: str | Path, *, family: str | None = None, config: Any = None,
                     write: bool = True) -> Report:
    """Diagnose a run dir (`metrics.jsonl`, `run.json`, `.hydra/config.yaml`) and write its `findings.json`.

    Args:
        config: the run's config when the caller has it (the trainer); default: `.hydra/config.yaml`.
    """
    from playground.rundir.runs import METRICS, read_metrics_jsonl, read_run_info, write_findings

    run_dir = Path(run_dir)
    metrics = run_dir / METRICS
    read = read_metrics_jsonl(metrics) if metrics.is_file() else None
    info = read_run_info(run_dir)
    records, problems = (read.records, read.problems) if read else ([], [f"{run_dir}: no {METRICS} yet"])
    config = plain_config(config) if config is not None else read_config(run_dir)
    diagnosis = diagnose(records, info=info, family=family, config=config)
    diagnosis.problems, diagnosis.source = problems, str(run_dir)
    onset.attach_checkpoint(diagnosis.last_good, run_dir)
    if read is not None and (note := read.skipped_note()):
        diagnosis.notes.append(note)
    if write:
        write_findings(run_dir, findings_document(diagnosis))
    return diagnosis


def diagnose_read(read: LogRead, *, family: str | None = None, loss_updates: float | None = None,
                  max_response_length: int | None = None) -> Report:
    """Diagnose a `LogRead` from any reader; a console log that reports an out-of-memory error counts as `oom`, one
    that ends in any other exception as `failed`.

    Args:
        loss_updates: a verl >= 0.7 log's updates per step, which its logged losses sum over (None: means).
        max_response_length: the run's data.max_response_length (None: unknown), for the lengths' cross-check.
    """
    # a log that ends in an exception failed there: no verdict of health, and the report says how it ended
    info: dict[str, Any] = {"status": "oom"} if read.out_of_memory else {"status": "failed"} if read.ended_with else {}
    if read.ended_with:
        info["error"], info["error_how"] = read.ended_with, read.ended_how
    if read.megatron_line:
        info["backend"] = f"megatron, line {read.megatron_line} of the log names it"
    # verl < 0.4 logged the entropy as actor/entropy_loss only; later versions' names do not tell them apart
    older = any(ENTROPY_LOSS in r for r in read.records) and not any(ENTROPY in r for r in read.records)
    info["verl_version"] = "older" if older else "unknown"
    if loss_updates is not None:
        info["loss_updates"] = loss_updates
    if max_response_length is not None:
        info["max_response_length"] = max_response_length
    if read.total_steps is not None:  # how far into its schedule the run is (plateau's "early" evidence)
        info["total_steps"] = read.total_steps
    if read.kind == "wandb_history":  # sparklines: shapes for the trends, sizes only where the summary gives them
        info.update(shape_only=True, unscaled=list(read.unscaled))
    diagnosis = diagnose(read.records, info=info or None, family=family)
    diagnosis.problems, diagnosis.source = list(read.problems), read.source
    # a log file's checkpoints lie beside it, a log dir's in it; pasted text has none
    source = Path(read.source) if read.source else None
    folder = source if source and source.is_dir() else source.parent if source and source.is_file() else None
    onset.attach_checkpoint(diagnosis.last_good, folder)
    if read.out_of_memory:
        diagnosis.notes.append("the log reports an out-of-memory error")
    if read.ended_with:
        diagnosis.notes.append(f"the log ends after its last step in: {read.ended_with} (the run stopped there: it did "
                               "not finish)")
    if read.selected:
        diagnosis.notes.append(f"read {read.selected}")
    if read.kind == "wandb_history":
        diagnosis.notes.append("a wandb end-of-run block: trends read from its sparklines, sizes judged only on the "
                               "run summary's last values")
    if note := read.skipped_note():
        diagnosis.notes.append(note)
    if loss_updates is None and any(PG_LOSS in r or KL_LOSS in r for r in read.records):
        diagnosis.notes.append("actor/pg_loss and actor/kl_loss read as means over a step's updates (the playground, "
                               "verl < 0.7); a verl >= 0.7 log sums them: pass --loss-updates N")
    return diagnosis


def diagnose_path(path: str | Path, *, family: str | None = None, loss_updates: float | None = None,
                  max_response_length: int | None = None, run: str | None = None) -> list[tuple[str, Report]]:
    """Diagnose whatever `path` is (`readers.path_kind`): a run dir (also writes its `findings.json`), a multirun dir
    (every run under it), a `metrics.jsonl`, a TensorBoard dir or event file, a verl console log, or an MLflow store
    (its path or tracking URI, `sqlite:////tmp/mlruns.db`; `run`: which of its runs, by name or id, default the newest).

    Raises:
        FileNotFoundError: nothing at `path`.
        ValueError: a tracking URI this cannot read, or `run` for a path that is not an MLflow store.
    """
    from playground.diagnose.readers import path_kind, read_any
    from playground.diagnose.readers_mlflow import store_path
    from playground.rundir.runs import find_runs

    path = store_path(path)
    if path_kind(path) in ("run", "runs") and run is None:  # a run's metrics.jsonl means its run dir
        runs = find_runs([path.parent if path.is_file() else path])
        return [(str(run_dir), diagnose_run_dir(run_dir, family=family)) for run_dir in runs]
    read = read_any(path, run)
    return [(read.source or str(path), diagnose_read(read, family=family, loss_updates=loss_updates,
                                                     max_response_length=max_response_length))]
