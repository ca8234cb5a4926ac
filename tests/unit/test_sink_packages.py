"""``airflow_cdc/sinks/`` keeps its modules in named packages, and each package's docstring
names its modules (docs/architecture.md, "Layers")."""

from __future__ import annotations

import ast
import re

from tests.unit.test_import_rules import PACKAGE

SINKS = PACKAGE / "sinks"
#: The packages of ``sinks/``: its facade (``__init__.py``) aside, no module is outside them.
PACKAGES = ("contract", "multiset", "routes", "storage", "delta")


def test_every_module_of_sinks_is_in_a_named_package() -> None:
    outside = [
        str(path.relative_to(SINKS))
        for path in sorted(SINKS.rglob("*.py"))
        if path != SINKS / "__init__.py" and path.relative_to(SINKS).parts[0] not in PACKAGES
    ]
    assert outside == []
    assert sorted(
        p.name for p in SINKS.iterdir() if p.is_dir() and p.name != "__pycache__"
    ) == sorted(PACKAGES)


def test_each_package_docstring_names_its_modules() -> None:
    for name in PACKAGES:
        package = SINKS / name
        doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
        named = set(re.findall(r"``(\w+)``", doc))
        modules = {p.stem for p in package.glob("*.py") if p.name != "__init__.py"}
        assert sorted(modules - named) == [], f"sinks/{name}/__init__.py does not name them"
