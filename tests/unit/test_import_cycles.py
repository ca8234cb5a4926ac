"""No import cycle in ``airflow_cdc/``: the modules' import graph has no strongly connected
component of more than one module.

An edge is any import of a module of the package: absolute (``import airflow_cdc.x``,
``from airflow_cdc.x import y``, to ``x.y`` when that is a module, else to ``x``) or
relative, at module level, inside a function or under ``TYPE_CHECKING``. A cycle through a
function's import or a type annotation is still two modules that each need the other: the
piece they share belongs in a module below both. An edge goes to the module named, not to
the packages above it (importing ``sinks.contract.base`` runs ``sinks/__init__.py`` too, but a
package's facade loads its names lazily and is not part of a module's design).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.unit.test_import_rules import PACKAGE


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(module: str, is_package: bool, node: ast.AST) -> list[str]:
    """The dotted names ``node`` imports (a ``from`` import: the module and each
    ``module.name``, one of which is a module)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - node.level + 1]
        target = ".".join([*base, *([node.module] if node.module else [])])
    else:
        target = node.module or ""
    return [f"{target}.{alias.name}" for alias in node.names] + [target]


def import_graph(root: Path) -> dict[str, set[str]]:
    """Each module of the package at ``root`` and the package's modules it imports."""
    paths = {module_name(root, path): path for path in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        edges = graph.setdefault(module, set())
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = imported(module, path.name == "__init__.py", node)
            if isinstance(node, ast.ImportFrom):  # y's module when it is one, else x
                names = [n for n in names[:-1] if n in paths] or names[-1:]
            for name in names:
                while name and name not in paths:
                    name = name.rpartition(".")[0]
                if name and name != module:
                    edges.add(name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
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
                        found.append(sorted(component))
    return found


def describe(graph: dict[str, set[str]], component: list[str]) -> str:
    members = set(component)
    return "; ".join(f"{m} -> {', '.join(sorted(graph[m] & members))}" for m in component)


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph(PACKAGE)
    assert len(graph) > 20
    assert [describe(graph, c) for c in cycles(graph)] == []


def test_a_planted_cycle_of_each_kind_is_found(tmp_path: Path) -> None:
    root = tmp_path / "airflow_cdc"
    files = {
        "__init__.py": "",
        "a/__init__.py": "",
        # a submodule named in a from-import, one side under TYPE_CHECKING
        "a/one.py": "from airflow_cdc.a import two\n",
        "a/two.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from airflow_cdc.a.one import X\n"
        ),
        # three modules, one import inside a function, one relative
        "b/__init__.py": "",
        "b/x.py": "from .y import f\n",
        "b/y.py": "def f():\n    import airflow_cdc.b.z\n",
        "b/z.py": "from ..b import x\n",
        # no cycle: a chain
        "c/__init__.py": "",
        "c/low.py": "",
        "c/high.py": "from airflow_cdc.c.low import thing\n",
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    found = cycles(import_graph(root))
    assert found == [
        ["airflow_cdc.a.one", "airflow_cdc.a.two"],
        ["airflow_cdc.b.x", "airflow_cdc.b.y", "airflow_cdc.b.z"],
    ]
