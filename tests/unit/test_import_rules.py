"""The tree shows the architecture: only the Airflow face imports airflow, only spark/
imports pyspark, model/ imports nothing of the package but itself."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_cdc"
AIRFLOW_FACE = {"hooks", "operators", "sensors", "triggers"}


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def layer_of(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0] if len(relative.parts) > 1 else ""


def test_import_rules() -> None:
    violations = []
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 20
    for path in files:
        if "migrations" in path.parts:
            continue
        layer = layer_of(path)
        for module in imported_modules(path):
            root = module.split(".")[0]
            if root == "airflow" and layer not in AIRFLOW_FACE:
                violations.append(
                    f"{path.relative_to(PACKAGE)} imports {module} (only {sorted(AIRFLOW_FACE)} may)"
                )
            if root == "pyspark" and layer != "spark":
                violations.append(f"{path.relative_to(PACKAGE)} imports {module} (only spark/ may)")
            if (
                layer == "model"
                and root == "airflow_cdc"
                and not module.startswith("airflow_cdc.model")
            ):
                violations.append(
                    f"{path.relative_to(PACKAGE)} imports {module} (model/ is self-contained)"
                )
    assert violations == []


def test_rule_checker_sees_violations(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import airflow.sdk\nfrom pyspark.sql import SparkSession\n")
    assert imported_modules(bad) == {"airflow.sdk", "pyspark.sql"}
