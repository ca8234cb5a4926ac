"""The tree shows the architecture (docs/architecture.md, "Layers").

* Packages are layered: each may import only the packages before it in :data:`ORDER` (its
  own modules aside), so no two packages import each other, at module level or inside a
  function. A top-level module (``observe.py``) counts as a package of its own.
* Only the Airflow face imports airflow; only ``spark/`` imports pyspark.
* No private name (``_x``, or a ``_module``) is imported from another package.
* A table format's package is reached through its facade only: outside ``sinks/``, nothing
  imports a module under ``sinks/delta/`` (the stream, the snapshot, verify and the
  operators talk to the ``Sink`` Protocol; the upkeep operator takes Delta's settings from
  the facade).
* The product imports none of the repository's tools (``devtools/``: local servers, the demo)
  and no test code: they are not in the wheel.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_cdc"

#: Lowest first: the connection ids and the ``[cdc]`` settings (the provider registration
#: reads them); value types; plain-Python rules and adapters of the source, sink and
#: metadata DB; the phases built on them; the Spark adapter; the Airflow face; tools.
ORDER = (
    "connection_ids",
    "settings",
    "model",
    "errors",
    "observe",
    "config",
    "rendered",
    "configured",
    "runner",
    "source",
    "sinks",
    "lineage",
    "metadata",
    "planning",
    "snapshot",
    "stream",
    "verify",
    "status",
    "spark",
    "airflow_settings",
    "hooks",
    "triggers",
    "sensors",
    "operators",
    "plugins",
    "provider_info",
    "dag_files",
    "cli",
)
#: The repository's tools and tests: outside the wheel, so the product never imports them.
OUTSIDE_THE_WHEEL = {"devtools", "tests"}
#: ``airflow_settings`` reads the ``[cdc]`` section through Airflow's conf; the command line reads
#: Airflow's configuration (``airflow-cdc dags install``'s folder, the status's ``[cdc]`` masks).
AIRFLOW_FACE = {"airflow_settings", "hooks", "operators", "sensors", "triggers", "plugins", "cli"}
#: Packages whose modules only their own package imports; others import the facade.
FACADES = ("sinks.delta",)


def imports(path: Path) -> Iterator[tuple[str, list[str]]]:
    """Each absolute import of ``path``: the module and the names taken from it."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, [alias.name for alias in node.names]


def package_of(root: Path, path: Path) -> str:
    relative = path.relative_to(root)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def violations(root: Path, package: str = "airflow_cdc") -> list[str]:
    """Every broken rule of the module docstring in the package at ``root``."""
    found = []
    rank = {name: i for i, name in enumerate(ORDER)}
    for path in sorted(root.rglob("*.py")):
        if "migrations" in path.parts or (path.name == "__init__.py" and path.parent == root):
            continue
        own = package_of(root, path)
        where = path.relative_to(root)
        if own not in rank:
            found.append(f"{where}: package {own!r} has no place in ORDER")
            continue
        for module, names in imports(path):
            parts = module.split(".")
            if parts[0] == "airflow" and own not in AIRFLOW_FACE:
                found.append(f"{where} imports {module} (only {sorted(AIRFLOW_FACE)} may)")
            if parts[0] == "pyspark" and own != "spark":
                found.append(f"{where} imports {module} (only spark/ may)")
            if parts[0] in OUTSIDE_THE_WHEEL:
                found.append(f"{where} imports {module}, which is not in the wheel")
            if parts[0] == package and own != "sinks":
                behind = [f for f in FACADES if module.startswith(f"{package}.{f}.")]
                if behind:
                    found.append(f"{where} imports {module}: use the facade {package}.{behind[0]}")
            if parts[0] != package or len(parts) < 2 or parts[1] == own:
                continue
            other = parts[1]
            if other not in rank:
                found.append(f"{where} imports {module}: {other!r} has no place in ORDER")
            elif rank[other] > rank[own]:
                found.append(f"{where} imports {module}: {other}/ is above {own}/")
            private = [p for p in parts[1:] if p.startswith("_") and not p.startswith("__")]
            private += [n for n in names if n.startswith("_") and not n.startswith("__")]
            if private:
                found.append(f"{where} imports private {', '.join(private)} of {other}/")
    return found


def test_the_package_keeps_its_layers() -> None:
    assert len(list(PACKAGE.rglob("*.py"))) > 20
    assert violations(PACKAGE) == []


def plant(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "airflow_cdc" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "airflow_cdc"


def test_a_planted_violation_of_each_rule_is_found(tmp_path: Path) -> None:
    root = plant(
        tmp_path,
        {
            "__init__.py": "",
            "model/__init__.py": "from airflow_cdc.source import catalog\n",  # upward
            "source/catalog.py": (
                "def f():\n"
                "    from airflow_cdc.stream.apply import x\n"  # upward, inside a function
                "    from airflow_cdc.config import _Private\n"  # private name
                "    import airflow.sdk\n"  # airflow outside its face
                "    from pyspark.sql import SparkSession\n"  # pyspark outside spark/
                "    from devtools.local_mariadb import LocalMariaDB\n"  # a repository tool
            ),
            "stream/apply.py": "from airflow_cdc.snapshot._job import y\n",  # private module
            "verify/check.py": "from airflow_cdc.sinks.delta.merge import merge\n",  # behind
            "sinks/contract/formats.py": "from airflow_cdc.sinks.delta.sink import DeltaSink\n",
            "gadgets/x.py": "",  # a package the order does not know
        },
    )
    found = violations(root)
    assert any("model/__init__.py imports airflow_cdc.source" in v for v in found)
    assert any("source/catalog.py imports airflow_cdc.stream.apply" in v for v in found)
    assert any("private _Private of config/" in v for v in found)
    assert any("imports airflow.sdk" in v for v in found)
    assert any("imports pyspark.sql" in v for v in found)
    assert any("private _job of snapshot/" in v for v in found)
    assert any("'gadgets' has no place" in v for v in found)
    assert any("imports devtools.local_mariadb, which is not in the wheel" in v for v in found)
    assert any(
        "verify/check.py imports airflow_cdc.sinks.delta.merge: use the facade" in v for v in found
    )
    assert len(found) == 9


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    root = plant(
        tmp_path,
        {
            "model/keys.py": "",
            "source/catalog.py": "from airflow_cdc.model import keys\nimport pyarrow\n",
            "stream/apply.py": "from airflow_cdc.source.catalog import load\n",
            "spark/job.py": "import pyspark\nfrom airflow_cdc.stream import apply\n",
            "operators/op.py": (
                "import airflow.sdk\nfrom airflow_cdc.spark import job\n"
                "from airflow_cdc.sinks.delta import DeltaSink\n"
            ),
        },
    )
    assert violations(root) == []
