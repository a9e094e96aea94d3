"""One vocabulary of metric names: `playground.metric_names` spells the names the code writes and reads,
`playground.metrics` declares them (groups, aliases, glossary), and no other module of `playground/` or `app/`
spells one. The data files that name metrics (rules, glossary, learning path, configs) name only known ones."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from playground import metric_names
from playground.metrics import ALIAS_PATTERNS, ALIASES, ALL_METRICS, canonical_name, is_known

ROOT = Path(__file__).resolve().parents[1]
VOCABULARY = {ROOT / "playground" / "metric_names.py", ROOT / "playground" / "metrics.py"}
# The groups' first parts, as metrics.py declares and aliases them (`actor`, `timing_s`, `val-core`, `mfu`, ...)
PREFIXES = sorted({name.split("/")[0] for name in (*ALL_METRICS, *ALIASES, *ALIASES.values()) if "/" in name}
                  | {m[1] for p, _ in ALIAS_PATTERNS if (m := re.match(r"\^([\w-]+)/", p.pattern))})
# A whole string of the shape `<group>/<anything without spaces>`: a metric name, a family's prefix, or the literal
# part of an f-string that builds one (`f"critic/score/{stat}"` holds the constant "critic/score/")
METRIC_SHAPED = re.compile(rf"^(?:{'|'.join(map(re.escape, PREFIXES))})/\S*$")
DATA_FILES = [ROOT / "playground" / "diagnose" / "rules.yaml", ROOT / "playground" / "glossary.yaml",
              ROOT / "playground" / "teach" / "learning_path.yaml", *sorted((ROOT / "conf").rglob("*.yaml"))]


def metric_shaped_strings(path: Path) -> Iterator[tuple[int, str]]:
    """(line, string) of every string constant in a module that has a metric name's shape (f-strings' parts too)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and METRIC_SHAPED.match(node.value):
            yield node.lineno, node.value


def test_the_shape_finds_names_prefixes_and_f_string_parts(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('A = "critic/score/mean"\nB = f"timing_s/{x}"\nC = "actor_rollout_ref.actor.optim.lr"\n'
                      'D = "a sentence about actor/pg_loss"\nE = "mfu/actor"\n')
    assert sorted(metric_shaped_strings(module)) == [(1, "critic/score/mean"), (2, "timing_s/"), (5, "mfu/actor")]


def test_no_module_outside_the_vocabulary_spells_a_metric_name():
    modules = [p for folder in ("playground", "app") for p in sorted((ROOT / folder).rglob("*.py"))]
    spelled = [f"{path.relative_to(ROOT)}:{line}: {text!r}" for path in modules if path not in VOCABULARY
               for line, text in metric_shaped_strings(path)]
    assert spelled == [], "use the constant in playground/metric_names.py:\n" + "\n".join(spelled)


def _declared(name: str) -> bool:
    """A known name, or a family's prefix that declared names start with (`critic/score`, `val/pass@`)."""
    return is_known(name) or any(known.startswith(name) and known != name for known in ALL_METRICS)


# a reader's x axis, spelled here because it has a metric's shape: verl's wandb step, not a metric of its own
NOT_DECLARED = {"WANDB_STEP"}


def test_every_name_in_the_vocabulary_is_declared():
    names = {k: v for k, v in vars(metric_names).items() if k.isupper() and isinstance(v, str)}
    assert set(NOT_DECLARED) <= set(names)
    assert [f"{k} = {v!r}" for k, v in names.items() if k not in NOT_DECLARED and not _declared(v)] == []
    assert len(set(names.values())) == len(names), "a name spelled by two constants"


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(key)
            yield from _strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item)


def _known_or_pattern(name: str) -> bool:
    """A known name (or alias), or a pattern over known names as the data files write them (`critic/score/*`,
    `training/rollout_probs_diff_*`, `val-core/<source>/reward/mean@N`)."""
    if is_known(canonical_name(name)):
        return True
    stem = re.split(r"[*<]", name)[0]
    return stem != name and any(known.startswith(stem) for known in ALL_METRICS)


@pytest.mark.parametrize("path", DATA_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_metric_a_data_file_names_is_known(path):
    with open(path, encoding="utf-8") as f:
        document = yaml.safe_load(f)
    unknown = sorted({s for s in _strings(document) if METRIC_SHAPED.match(s) and not _known_or_pattern(s)})
    assert unknown == []
