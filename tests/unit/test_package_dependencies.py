"""Every module the package imports comes from a distribution its metadata declares, so the
wheel works alone (installed into a fresh environment by pip's resolver, not the lock):
``tests/integration/test_wheel_install.py`` installs it so."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: Airflow's namespace is shared by the core and each provider.
AIRFLOW_PARTS = {
    "airflow.providers.apache.spark": "apache-airflow-providers-apache-spark",
    "airflow.providers.openlineage": "apache-airflow-providers-openlineage",
    "airflow.providers.common.compat": "apache-airflow-providers-common-compat",
}


def _name(requirement: str) -> str:
    found = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert found, requirement
    return re.sub(r"[-_.]+", "-", found.group(0)).lower()


def _declared() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted = list(project["dependencies"])
    wanted += [r for name, reqs in extras.items() if name != "test" for r in reqs]
    return {_name(r) for r in wanted}


def _imports() -> dict[str, set[str]]:
    """Each imported module (a top-level name, or an Airflow namespace part) and the files."""
    found: dict[str, set[str]] = {}
    for path in (REPO / "airflow_cdc").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                found.setdefault(name, set()).add(str(path.relative_to(REPO)))
    return found


def _distributions(module: str) -> set[str]:
    for part, distribution in AIRFLOW_PARTS.items():
        if module == part or module.startswith(part + "."):
            return {distribution}
    top = module.split(".")[0]
    if top == "airflow":
        return {"apache-airflow"}
    return {_name(d) for d in packages_distributions().get(top, [])}


def test_every_imported_module_is_a_declared_dependency() -> None:
    declared = _declared()
    missing: dict[str, set[str]] = {}
    for module, files in _imports().items():
        top = module.split(".")[0]
        if top in sys.stdlib_module_names or top == "airflow_cdc":
            continue
        distributions = _distributions(module)
        assert distributions, f"{module} (imported by {sorted(files)}) is installed by nothing"
        if not distributions & declared:
            missing[module] = files
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"
