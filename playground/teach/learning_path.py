"""The explorer's learning path as data: the metrics guide's chapters in order, each on two demo runs, with a question.

`learning_path.yaml` (beside this module) holds the chapters; `load` reads and checks them, so a page that draws a
chapter can trust every field: both languages everywhere, known metric keys and catalogue ids, overrides Hydra takes,
one right option per question. The demo runs are named, not built: the names are checked against the ones the caller
passes (`playground.demo.DEMO_RUNS`', an entry above this layer, which this module may not import).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from playground.config.overrides import OverrideError, parse_strict
from playground.failures import FAILURE_IDS
from playground.metrics import is_known
from playground.rundir.runs import TOKEN_FOCI
from playground.teach.i18n import LANGS

LEARNING_PATH = Path(__file__).with_name("learning_path.yaml")
# the guide's chapters the path walks, in its order (§11.3: its panels over training/global_step, read for the step
# where a run turns)
SECTIONS = ("§1", "§2", "§3", "§4", "§5", "§7", "§11", "§11.3")
REQUIRED = {"section", "title", "paragraph", "metrics", "healthy", "question"}
OPTIONAL = {"broken", "finding", "inspect"}
QUESTION_KEYS = {"text", "base", "knob", "options", "answer"}


class LearningPathError(ValueError):
    """A chapter that breaks the file's rules; the message is one line and names the chapter and the key."""


@dataclass(frozen=True)
class Option:
    text: dict[str, str]
    right: bool


@dataclass(frozen=True)
class Question:
    text: dict[str, str]
    base: str  # the demo run whose overrides the knob goes on top of
    knob: tuple[str, ...]  # Hydra overrides (`key=value`)
    options: tuple[Option, ...]
    answer: dict[str, str]

    @property
    def right(self) -> int:
        """The right option's index."""
        return next(i for i, option in enumerate(self.options) if option.right)


@dataclass(frozen=True)
class Chapter:
    section: str  # "§1"
    title: dict[str, str]
    paragraph: dict[str, str]
    metrics: tuple[str, ...]
    healthy: str  # demo run names
    broken: str | None
    finding: str | None  # the catalogue id the diagnosis finds in `broken`
    inspect: str | None  # the token inspector's focus at the step where `broken` breaks (token runs only)
    question: Question

    @property
    def number(self) -> str:
        """The section without its sign ("1", "11", "11-3"): what widget keys, CSS classes and folder names carry."""
        return self.section.removeprefix("§").replace(".", "-")

    @property
    def runs(self) -> tuple[str, ...]:
        """The demo runs the chapter draws: the healthy one, then the broken one where there is one."""
        return (self.healthy,) if self.broken is None else (self.healthy, self.broken)


def _pair(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, Mapping) or set(value) != set(LANGS):
        raise LearningPathError(f"{where}: needs exactly the languages {list(LANGS)}, got {value!r:.80}")
    if not all(isinstance(text, str) and text.strip() for text in value.values()):
        raise LearningPathError(f"{where}: a language's text is empty or not text")
    return {lang: str(value[lang]).strip() for lang in LANGS}


def _run(value: Any, runs: Collection[str], where: str) -> str:
    if value not in runs:
        raise LearningPathError(f"{where}: {value!r} is no demo run (playground/demo.py DEMO_RUNS: {sorted(runs)})")
    return str(value)


def _knob(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise LearningPathError(f"{where}: needs a list of key=value overrides")
    for item in value:
        try:
            override = parse_strict(str(item))
        except OverrideError as error:
            raise LearningPathError(f"{where}: {error}") from None
        if not override.plain or override.sweep:
            raise LearningPathError(f"{where}: {item!r} is not one key=value (no prefix, no sweep)")
    return tuple(str(item) for item in value)


def _options(value: Any, where: str) -> tuple[Option, ...]:
    if not isinstance(value, list) or len(value) < 2:
        raise LearningPathError(f"{where}: needs two options or more")
    options = []
    for i, item in enumerate(value):
        if not isinstance(item, Mapping) or set(item) != {"text", "right"} or not isinstance(item["right"], bool):
            raise LearningPathError(f"{where}[{i}]: an option is {{text: {{en, zh}}, right: true|false}}")
        options.append(Option(_pair(item["text"], f"{where}[{i}].text"), item["right"]))
    if sum(option.right for option in options) != 1:
        raise LearningPathError(f"{where}: exactly one option is right")
    return tuple(options)


def _question(value: Any, chapter: Mapping[str, Any], runs: Collection[str], where: str) -> Question:
    if not isinstance(value, Mapping) or set(value) != QUESTION_KEYS:
        raise LearningPathError(f"{where}: needs exactly the keys {sorted(QUESTION_KEYS)}")
    base = _run(value["base"], runs, f"{where}.base")
    if base not in (chapter["healthy"], chapter.get("broken")):
        raise LearningPathError(f"{where}.base: {base!r} is neither the chapter's healthy nor its broken run")
    return Question(_pair(value["text"], f"{where}.text"), base, _knob(value["knob"], f"{where}.knob"),
                    _options(value["options"], f"{where}.options"), _pair(value["answer"], f"{where}.answer"))


def _chapter(item: Any, runs: Collection[str], index: int) -> Chapter:
    where = f"chapter {index + 1}"
    if not isinstance(item, Mapping):
        raise LearningPathError(f"{where}: a chapter is a mapping")
    where = f"{item.get('section', where)}"
    keys = set(item)
    if not REQUIRED <= keys or not keys <= REQUIRED | OPTIONAL:
        raise LearningPathError(f"{where}: keys {sorted(keys)}; needs {sorted(REQUIRED)}, may have {sorted(OPTIONAL)}")
    metrics = item["metrics"]
    if not isinstance(metrics, list) or not metrics:
        raise LearningPathError(f"{where}.metrics: needs a list of metric keys")
    unknown = [m for m in metrics if not is_known(str(m))]
    if unknown:
        raise LearningPathError(f"{where}.metrics: {unknown} are no metrics the guide names (playground/metrics.py)")
    broken = item.get("broken")
    if broken is not None:
        _run(broken, runs, f"{where}.broken")
    # the finding says where the broken run breaks, the inspector looks there: neither without a broken run
    if (item.get("finding") is None) != (broken is None):
        raise LearningPathError(f"{where}: a broken run needs the finding that breaks it, and a finding a broken run")
    if item.get("finding") is not None and item["finding"] not in FAILURE_IDS:
        raise LearningPathError(f"{where}.finding: {item['finding']!r} is no catalogue id (playground/failures.py)")
    if item.get("inspect") is not None and (broken is None or item["inspect"] not in TOKEN_FOCI):
        raise LearningPathError(f"{where}.inspect: needs a broken run and one of {list(TOKEN_FOCI)}")
    return Chapter(section=str(item["section"]), title=_pair(item["title"], f"{where}.title"),
                   paragraph=_pair(item["paragraph"], f"{where}.paragraph"),
                   metrics=tuple(str(m) for m in metrics), healthy=_run(item["healthy"], runs, f"{where}.healthy"),
                   broken=broken, finding=item.get("finding"), inspect=item.get("inspect"),
                   question=_question(item["question"], item, runs, f"{where}.question"))


def load(runs: Collection[str], path: Path = LEARNING_PATH) -> list[Chapter]:
    """The chapters, checked (LearningPathError, one line, on the first rule broken).

    Args:
        runs: the demo runs' names a chapter may name (`[name for name, _ in playground.demo.DEMO_RUNS]`).
        path: the file (default `learning_path.yaml` beside this module).
    """
    with open(path, encoding="utf-8") as f:
        document = yaml.safe_load(f)
    if not isinstance(document, Mapping) or set(document) != {"chapters"} or not isinstance(document["chapters"], list):
        raise LearningPathError(f"{path}: needs one key, `chapters`, a list")
    chapters = [_chapter(item, runs, i) for i, item in enumerate(document["chapters"])]
    sections = tuple(chapter.section for chapter in chapters)
    if sections != SECTIONS:
        raise LearningPathError(f"{path}: the sections are {list(sections)}, the path walks {list(SECTIONS)}")
    return chapters
