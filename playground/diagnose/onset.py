"""When a run went wrong, and where to go back to: each finding's onset, the run's last good step before the first
problem, and the last checkpoint saved at or before it.

A finding's onset is the first step of what its rule first saw hold: for a window or trend rule the first step of the
first window on which the condition held (`Finding.since_step`), for a point, a whole-run shape or a run fact the
step it held at (`first_step`). The last good step is the last logged step before the earliest onset of any finding of
severity warning or worse; none where no such finding exists, or where the first one holds from the log's first step.

Checkpoints are verl's: `trainer.default_local_dir` holds one `global_step_<N>/` folder per save (verl's default
`checkpoints/<project_name>/<experiment_name>`, relative to where the trainer was started). They are looked for in
the run dir (or the folder beside a log), in its `checkpoints/` and in verl's default layout under it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from playground.diagnose.finding import Finding
from playground.diagnose.root_causes import PROBLEM_SEVERITIES

CHECKPOINT = re.compile(r"global_step_(\d+)")  # verl's folder per save (verl/trainer/ppo/ray_trainer.py)
# where a run dir, or the folder beside a log, holds such folders: itself, `checkpoints/`, and verl's default
# `trainer.default_local_dir` (checkpoints/<project>/<experiment>) under it
CHECKPOINT_GLOBS = ("global_step_*", "checkpoints/global_step_*", "checkpoints/*/*/global_step_*")


def onset_step(finding: Finding | Mapping[str, Any]) -> int:
    """The first step of what the finding's rule first saw hold (`since_step`, else `first_step`); a finding read
    back from an older `findings.json` without `onset_step` gives the same."""
    if isinstance(finding, Finding):
        return finding.onset_step
    for key in ("onset_step", "since_step", "first_step"):
        if finding.get(key) is not None:
            return int(finding[key])
    raise ValueError(f"finding {finding.get('id')!r} has no step")


@dataclass
class LastGood:
    """The run's last good step: the step before its first problem (None: the problem holds from the first step),
    the finding and onset that end it, and the last checkpoint at or before it (its folder's name and path)."""

    onset_step: int  # the earliest onset of a warning or worse
    finding: str  # whose onset it is
    step: int | None
    checkpoint: str | None = None  # "global_step_40"
    checkpoint_path: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def last_good(findings: Iterable[Finding], steps: Sequence[int]) -> LastGood | None:
    """The last logged step before the earliest onset of a finding of warning or worse, among the log's `steps`
    (None where no finding is a problem)."""
    problems = [f for f in findings if f.severity in PROBLEM_SEVERITIES]
    if not problems:
        return None
    first = min(problems, key=lambda f: (onset_step(f), f.id))
    onset = onset_step(first)
    return LastGood(onset_step=onset, finding=first.id, step=max((s for s in steps if s < onset), default=None))


def checkpoints(folder: str | Path) -> list[tuple[int, Path]]:
    """The `global_step_<N>` folders in and under `folder` (CHECKPOINT_GLOBS), by step."""
    found: dict[int, Path] = {}
    for pattern in CHECKPOINT_GLOBS:
        for path in Path(folder).glob(pattern):
            match = CHECKPOINT.fullmatch(path.name)
            if match and path.is_dir():
                found.setdefault(int(match.group(1)), path)
    return sorted(found.items())


def attach_checkpoint(good: LastGood | None, folder: str | Path | None) -> None:
    """Name in `good` the last checkpoint in `folder` saved at or before the last good step."""
    if good is None or good.step is None or folder is None or not Path(folder).is_dir():
        return
    saved = [(step, path) for step, path in checkpoints(folder) if step <= good.step]
    if saved:
        good.checkpoint, good.checkpoint_path = saved[-1][1].name, str(saved[-1][1])


LABELS = {"en": {"good": "last good step: {step}", "none": "last good step: no good step (a problem from step {onset})",
                 "checkpoint": " (checkpoint: {name})", "since": "since step {step}"},
          "zh": {"good": "最后正常的一步：第 {step} 步", "none": "最后正常的一步：无（从第 {onset} 步起就有问题）",
                 "checkpoint": "（检查点：{name}）", "since": "自第 {step} 步起"}}


def last_good_line(good: LastGood | Mapping[str, Any] | None, lang: str = "en") -> str | None:
    """"last good step: 41 (checkpoint: global_step_40)"; "no good step" where the problem holds from the first
    step; None where no finding is a problem (or a `findings.json` `last_good`, read back, says none)."""
    if good is None:
        return None
    if not isinstance(good, LastGood):  # read back: its fields, whatever else a later writer adds
        known: dict[str, Any] = {f.name: good.get(f.name) for f in fields(LastGood)}
        good = LastGood(**known)
    label = LABELS[lang]
    if good.step is None:
        return label["none"].format(onset=good.onset_step)
    tail = label["checkpoint"].format(name=good.checkpoint) if good.checkpoint else ""
    return label["good"].format(step=good.step) + tail


def since_text(finding: Finding, lang: str = "en") -> str:
    """"since step 42": the finding's onset."""
    return LABELS[lang]["since"].format(step=onset_step(finding))
