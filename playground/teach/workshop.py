"""Workshop exercises as data: what an exercise is, where its runs live, and a participant's progress.

Each folder `exercises/NN_slug/` hands participants a misbehaving run (`mystery.yaml`, plus the `cause` that
`exercise.yaml` keeps from them) to read in the explorer, name (a catalogue id) and fix. This module only reads and
writes the exercises' files (the explorer's Workshop page uses it); `playground.exercise` is the command line and the
checker that trains the runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from playground import PYTHON
from playground.rundir.runs import RUN_INFO, read_json, read_run_info, write_json_atomic
from playground.teach import i18n

ROOT = Path(__file__).resolve().parents[2]
EXERCISES_DIR = ROOT / "exercises"
WORKSHOP_ENV = "PLAYGROUND_WORKSHOP"  # where the runs go (default outputs/workshop in the checkout)
PROGRESS = "progress.json"  # per exercise: hints shown, diagnosed, solved


class ExerciseError(ValueError):
    """Bad input (unknown exercise or id, an override that does not parse); the message is one line."""


@dataclass
class Exercise:
    number: int
    folder: Path
    id: str  # the folder name, e.g. "01_cartpole_relapse": also the run's folder under the workshop root
    title: dict[str, str]
    task: str
    diagnosis: str  # the catalogue id the participant should name
    reference_fix: list[str]  # Hydra overrides
    bar: dict[str, Any]  # {"metric": ..., "value": ...}: the fixed run's last value of metric must reach value
    steps: dict[str, int]  # training steps for start, check and the shortened test run
    accepted: list[str] = field(default_factory=list)  # other ids that read the same run correctly
    stop_at_bar: bool = True  # the check's run ends once the task's score reaches the bar
    hints: list[dict[str, str]] = field(default_factory=list)  # towards the diagnosis, one at a time
    fix_hints: list[dict[str, str]] = field(default_factory=list)  # towards a fix, once the diagnosis is right
    near_misses: dict[str, dict[str, str]] = field(default_factory=dict)  # a tempting wrong id -> why not
    # The overrides that break the run, the ones the reference fix undoes: they are the answer, so they live here
    # (which participants leave closed), not in mystery.yaml, which the worksheet sends them to.
    cause: list[str] = field(default_factory=list)
    # An exercise whose cause arrives mid-run (`onset_step` in `cause`) may also ask for the run's last good step:
    # {"tolerance": K}, the steps an answer may be off the doctor's (`playground.exercise.check_last_good`).
    last_good: dict[str, int] | None = None

    @property
    def right_ids(self) -> list[str]:
        return [self.diagnosis, *self.accepted]

    def mystery(self) -> list[str]:
        """The mystery config's overrides: `mystery.yaml`'s (what participants may read), then the `cause`."""
        with open(self.folder / "mystery.yaml", encoding="utf-8") as f:
            return [*(str(o) for o in yaml.safe_load(f)["overrides"]), *self.cause]

    def worksheet(self, lang: str) -> str:
        return (self.folder / f"worksheet.{lang}.md").read_text(encoding="utf-8")


def load(folder: Path) -> Exercise:
    """An exercise from its folder; `exercise.yaml` holds the fields of `Exercise` by name."""
    with open(folder / "exercise.yaml", encoding="utf-8") as f:
        meta = {k: v for k, v in yaml.safe_load(f).items() if v is not None}
    return Exercise(number=int(folder.name[:2]), folder=folder, **meta)


def load_all(exercises_dir: Path = EXERCISES_DIR) -> list[Exercise]:
    folders = sorted(p for p in exercises_dir.glob("[0-9][0-9]_*") if (p / "exercise.yaml").is_file())
    return [load(p) for p in folders]


def find(ref: str, exercises_dir: Path = EXERCISES_DIR) -> Exercise:
    """An exercise by number ("3", "03") or folder name."""
    exercises = load_all(exercises_dir)
    for ex in exercises:
        if ref in (ex.id, str(ex.number), f"{ex.number:02d}"):
            return ex
    raise ExerciseError(f"no exercise {ref!r}: choose one of {[ex.number for ex in exercises]} (see `list`)")


def workshop_root() -> Path:
    return Path(os.environ.get(WORKSHOP_ENV, ROOT / "outputs" / "workshop"))


def mystery_dir(ex: Exercise, root: Path | None = None) -> Path:
    return (root or workshop_root()) / ex.id / "mystery"


def public_view(ex: Exercise, root: Path | None = None) -> dict[str, Any]:
    """What a participant may see of an exercise (the explorer's Workshop page): no diagnosis, no fix."""
    return {"number": ex.number, "id": ex.id, "title": dict(ex.title), "task": ex.task,
            "worksheet": {lang: ex.worksheet(lang) for lang in ("en", "zh")}, "hints": list(ex.hints),
            "run": str(mystery_dir(ex, root).resolve()), "start": f"{PYTHON} -m playground.exercise start {ex.number}",
            "check": f"{PYTHON} -m playground.exercise check {ex.number} --diagnosis <id> --fix \"<key=value ...>\"",
            "last_good": ex.last_good is not None,
            "check_step": f"{PYTHON} -m playground.exercise check {ex.number} --last-good <step>"}


def mark_solved(run_dir: Path) -> bool:
    """Set `solved: true` in a mystery run's run.json (the explorer then shows its findings)."""
    info = read_run_info(run_dir)
    if info is None:
        return False
    write_json_atomic(run_dir / RUN_INFO, {**info, "solved": True})
    return True


def _progress_path(ex: Exercise, root: Path | None) -> Path:
    return (root or workshop_root()) / ex.id / PROGRESS


def read_progress(ex: Exercise, root: Path | None = None) -> dict[str, Any]:
    return read_json(_progress_path(ex, root)) or {}


def save_progress(ex: Exercise, data: dict[str, Any], root: Path | None = None) -> None:
    path = _progress_path(ex, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, data)


def say(key: str, lang: str, **fields: Any) -> str:
    """A workshop message (`exercises/messages.yaml`) in `lang`."""
    return i18n.text_in(EXERCISES_DIR / "messages.yaml", key, lang, **fields)


def next_hint(ex: Exercise, progress: dict, kind: str, lang: str) -> str:
    hints = ex.hints if kind == "hints" else ex.fix_hints
    shown = int(progress.get(kind, 0))
    if shown >= len(hints):
        return say("no_hints", lang)
    progress[kind] = shown + 1
    return say("hint", lang, k=shown + 1, n=len(hints), text=hints[shown][lang])


def default_lang() -> str:
    lang = os.environ.get("PLAYGROUND_LANG") or os.environ.get("LANG", "")
    return "zh" if lang.lower().startswith("zh") else "en"


def state(ex: Exercise, root: Path) -> str:
    """How far a participant got: solved, diagnosed, or the mystery run's status."""
    progress = read_progress(ex, root)
    if progress.get("solved"):
        return "solved"
    if progress.get("diagnosed"):
        return "diagnosed"
    info = read_run_info(mystery_dir(ex, root))
    return info.get("status", "?") if info else "not started"
