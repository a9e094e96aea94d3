"""Every place a scenario touches (docs/adding-a-task.md, "A scenario"), checked for every scenario id: a failure names
each place a scenario is missing from, all of them in one message.

A scenario is an id of the catalogue (`playground.failures`) reproduced on purpose by `scenario=<id>`, on the tasks
whose `conf/scenario_task/<task>_<id>.yaml` exists (its cells; healthy's are every task without a
`task.default_scenario`). The ids checked are the catalogue's scenario ids and every `conf/scenario/*.yaml` but the
workshop's `mystery`, so a file without an id and an id without a file both show.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path

import yaml

from playground import failures
from playground.config import ANY_TASK_SCENARIOS, CONF_DIR, known_options, scenarios_of
from playground.diagnose import catalogue
from playground.diagnose.replay import REFERENCE_PATH
from tests.diagnose.test_engine import CASES
from tests.test_config import ALLOWED
from tests.test_docs_links import _scenario_table

ROOT = Path(__file__).resolve().parents[1]
CONF = Path(CONF_DIR)
HEALTHY = "healthy"


def scenario_ids() -> list[str]:
    files = set(known_options("scenario")) - set(ANY_TASK_SCENARIOS)
    return [*failures.SCENARIO_IDS, *sorted(files - set(failures.SCENARIO_IDS))]


@functools.cache
def _scenarios_by_task() -> dict[str, list[str]]:
    return {task: scenarios_of(task) for task in known_options("task")}


def cells(scenario: str) -> list[str]:
    """The tasks the scenario applies to."""
    return [task for task, scenarios in _scenarios_by_task().items() if scenario in scenarios]


def in_failures(scenario: str) -> list[str]:
    missing = []
    if scenario not in failures.SCENARIO_IDS:
        missing.append("an id in WARNING_IDS or CRITICAL_IDS")
    if set(failures.TITLES.get(scenario, {})) != {"en", "zh"}:
        missing.append("a title in TITLES (en, zh)")
    return missing


def scenario_file(scenario: str) -> list[str]:
    path = CONF / "scenario" / f"{scenario}.yaml"
    if not path.is_file():
        return ["the file"]
    text = path.read_text(encoding="utf-8")
    missing = []
    if not text.startswith("# @package _global_\n# "):
        missing.append("a header comment saying what it changes")
    if (yaml.safe_load(text) or {}).get("scenario") != scenario:
        missing.append(f"`scenario: {scenario}`")
    if f"scenario={scenario}" not in text:
        missing.append("its command")
    return missing


def scenario_task_files(scenario: str) -> list[str]:
    if scenario == HEALTHY:
        return [] if cells(scenario) else ["a task without a default_scenario"]
    if not cells(scenario):
        return ["one file for a task it reproduces on"]
    missing = []
    for task in cells(scenario):
        text = (CONF / "scenario_task" / f"{task}_{scenario}.yaml").read_text(encoding="utf-8")
        if not text.startswith("# @package _global_\n#") or f"task={task} scenario={scenario}" not in text:
            missing.append(f"{task}_{scenario}.yaml: a comment saying why its values cause it, and its command")
    return missing


def rules_yaml(scenario: str) -> list[str]:
    document = catalogue.document()
    missing = []
    if scenario != HEALTHY and not any(rule["id"] == scenario for rule in document["rules"]):
        missing.append("a rule under `rules` with this id")
    if set(document["catalogue"].get(scenario, {})) < {"en", "zh"}:
        missing.append("a `catalogue` entry (en, zh)")
    return missing


def catalogue_md(scenario: str) -> list[str]:
    text = (ROOT / "docs" / "catalogue.md").read_text(encoding="utf-8")
    return [] if f"\n| `{scenario}` |" in text else ["a row (.venv/bin/python -m playground.diagnose --catalogue)"]


def engine_cases(scenario: str) -> list[str]:
    return [] if scenario == HEALTHY or scenario in CASES else ["a trigger and a near miss in CASES"]


def config_snapshot(scenario: str) -> list[str]:
    return [f"ALLOWED[{task!r}]" for task in cells(scenario) if scenario not in ALLOWED.get(task, [])]


@functools.cache
def _table(page: Path) -> dict[str, set[str]]:
    return _scenario_table(page)


def scenario_tables(scenario: str) -> list[str]:
    missing = []
    for page in (ROOT / "README.md", ROOT / "docs" / "failure-modes.md"):
        table = _table(page)
        missing += [f"{page.name}: the {task} row" for task in cells(scenario) if scenario not in table.get(task, ())]
    return missing


@functools.cache
def _replay_tasks() -> dict:
    return yaml.safe_load(REFERENCE_PATH.read_text(encoding="utf-8"))["tasks"]


def replay_reference(scenario: str) -> list[str]:
    tasks = _replay_tasks()
    return [f"tasks.{task}.scenarios (.venv/bin/python -m benchmarks.replay_reference)" for task in cells(scenario)
            if scenario not in ((tasks.get(task) or {}).get("scenarios") or {})]


@functools.cache
def _trained_cells() -> set[tuple[str, str]]:
    """The (task, scenario) cells a module of tests/scenarios trains: a module that derives its cases from
    `scenarios_of` trains every cell of each task it names in quotes; any module trains a cell it writes out as
    `task=<task>` and `scenario=<id>`."""
    trained = set()
    for path in (ROOT / "tests" / "scenarios").glob("test_*.py"):
        text = path.read_text(encoding="utf-8")
        for task, scenarios in _scenarios_by_task().items():
            if "scenarios_of(" in text and f'"{task}"' in text:
                trained |= {(task, s) for s in scenarios}
            trained |= {(task, s) for s in scenarios
                        if re.search(rf"\btask={task}\b", text) and re.search(rf"\bscenario={s}\b", text)}
    return trained


def scenario_tests(scenario: str) -> list[str]:
    if scenario == HEALTHY:
        return []
    trained = _trained_cells()
    return [f"a test that trains it on {task}" for task in cells(scenario) if (task, scenario) not in trained]


def shipped_bases(scenario: str) -> list[str]:
    from playground.bases import base_settings
    from playground.tasks.sft import SHIPPED, cache_key

    missing = []
    for task in cells(scenario):
        family = yaml.safe_load((CONF / "task" / f"{task}.yaml").read_text(encoding="utf-8"))["task"]["family"]
        key = cache_key(*base_settings([f"task={task}", f"scenario={scenario}"])) if family == "token" else None
        if key is not None and not (SHIPPED / f"{key}.pt").is_file():
            missing.append(f"the SFT base of {task} (.venv/bin/python -m playground.bases)")
    return missing


# place -> what it lacks for a scenario (nothing when the scenario is there)
PLACES: dict[str, Callable[[str], list[str]]] = {
    "playground/failures.py": in_failures,
    "conf/scenario/<id>.yaml": scenario_file,
    "conf/scenario_task/<task>_<id>.yaml": scenario_task_files,
    "playground/diagnose/rules.yaml": rules_yaml,
    "docs/catalogue.md": catalogue_md,
    "tests/diagnose/test_engine.py": engine_cases,
    "tests/test_config.py": config_snapshot,
    "README.md and docs/failure-modes.md, the task and scenario table": scenario_tables,
    "playground/diagnose/replay_reference.yaml": replay_reference,
    "tests/scenarios/": scenario_tests,
    "bases/": shipped_bases,
}


def missing_places(scenario: str) -> list[str]:
    return [f"{place}: {what}" for place, check in PLACES.items() for what in check(scenario)]


def test_every_scenario_is_in_every_place_a_scenario_touches():
    missing = [f"{scenario} -> {where}" for scenario in scenario_ids() for where in missing_places(scenario)]
    assert not missing, ("scenarios missing from a place a scenario touches (docs/adding-a-task.md, \"A scenario\"):\n"
                         + "\n".join(missing))


def test_the_recipe_in_the_docs_names_every_place_the_test_checks():
    text = (ROOT / "docs" / "adding-a-task.md").read_text(encoding="utf-8")
    recipe = text[text.index("## A scenario"):]
    for place in PLACES:
        for path in re.findall(r"[\w/.<>-]+/[\w.<>-]*|[\w-]+\.(?:md|py|yaml)", place):
            assert f"`{path}`" in recipe, path
