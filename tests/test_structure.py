"""The code's shape: no import cycle inside `playground`, no class name defined twice.

Both are read from the source with `ast`, so a cycle hidden in a function-level import counts as well: a lazy import
that closes a loop still ties two modules together, and a newcomer reading one must read the other.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "playground"
CLASS_DIRS = (ROOT / "playground", ROOT / "app", ROOT / "hydra_plugins")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module → the `playground` modules it imports anywhere in its body (module level or inside a function)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # a relative import: from the package, `level - 1` packages up
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*up, base] if base else up)
                for alias in node.names:  # `from pkg import module` names a module; `from mod import name` the module
                    full = f"{base}.{alias.name}"
                    targets.add(full if full in modules else base)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            nxt = next(successors, None)
            if nxt is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))
            elif nxt not in index:
                index[nxt] = low[nxt] = len(index)
                stack.append(nxt)
                on_stack.add(nxt)
                work.append((nxt, iter(sorted(graph[nxt]))))
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
    return cycles


def test_the_cycle_finder_finds_a_cycle_and_nothing_else():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert import_cycles(graph) == [["a", "b", "c"]]


def test_the_import_graph_sees_imports_inside_functions():
    graph = import_graph()
    assert "playground.trainer" in graph["playground.train"]  # `fit` imports the trainer lazily


def test_no_import_cycle_in_playground():
    assert import_cycles(import_graph()) == []


def test_no_class_name_is_defined_twice():
    names = Counter()
    for folder in CLASS_DIRS:
        for path in folder.rglob("*.py"):
            tree = ast.parse(path.read_text(), filename=str(path))
            names.update(node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef))
    assert sorted(name for name, count in names.items() if count > 1) == []
