"""Small pieces: a function that does not fit on a screen, or a module past a few hundred
lines, is asking to be split along a name (docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_cdc"
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 400


def oversized(root: Path) -> list[str]:
    """Every function longer than :data:`MAX_FUNCTION_LINES` (``def`` to its last line) and
    every module longer than :data:`MAX_MODULE_LINES` under ``root``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        where = path.relative_to(root)
        if len(text.splitlines()) > MAX_MODULE_LINES:
            found.append(f"{where}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{where}:{node.lineno} {node.name}: {length} lines")
    return found


def test_no_long_function_and_no_long_module() -> None:
    assert oversized(PACKAGE) == []


def test_the_check_sees_a_long_function_and_a_long_module(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "long_function.py").write_text(f"def f():\n{body}\n")
    (tmp_path / "long_module.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    (tmp_path / "fine.py").write_text(f"def f():\n{body[: body.rindex(chr(10))]}\n")
    assert oversized(tmp_path) == [
        f"long_function.py:1 f: {MAX_FUNCTION_LINES + 1} lines",
        f"long_module.py: {MAX_MODULE_LINES + 1} lines",
    ]
