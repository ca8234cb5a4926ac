"""The jobs' observation points (``airflow_cdc.observe``): observers installed in-process
only, and no switch in the product that lets the environment or a job spec run test code;
the tests' pause points reach a Spark driver through Python's start-up hook."""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_cdc import observe
from airflow_cdc.config import ChunkJobSpec, StreamJobSpec
from airflow_cdc.observe import Point, install, installed, reach, uninstall
from airflow_cdc.snapshot.chunk_task import ChunkTask
from tests.support.pause_points import PAUSE_DIR_ENV, PAUSE_SITE, pause_environment, pausing

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("airflow_cdc", "dags", "spark_jobs")
#: Calls that import or run code a string names.
DYNAMIC_IMPORTS = {"import_module", "__import__", "spec_from_file_location", "run_module"}
#: Names of the retired switch and of the tests' hook: none belongs in the product.
TEST_HOOK_NAMES = (
    "AIRFLOW_CDC_PROBE",
    "AIRFLOW_CDC_PROBE_ARGUMENT",
    "ProbeConfig",
    "Probe",
    PAUSE_DIR_ENV,
    "pause_points",
    "PausePoints",
)


class Recorder:
    def __init__(self, seen: list[tuple[str, Point]], name: str) -> None:
        self.seen, self.name = seen, name

    def reach(self, point: Point) -> None:
        self.seen.append((self.name, point))


def test_the_points_keep_their_names() -> None:
    assert [str(p) for p in Point] == [
        "chunk_start",
        "after_low_watermark",
        "after_read",
        "before_commit",
        "files_written",
        "after_commit",
        "stream_before_apply",
        "stream_after_apply",
        "stream_in_order_merge",
        "stream_replay_merge",
    ]


def test_nothing_observes_a_point_by_default() -> None:
    assert observe._observers == []
    reach(Point.CHUNK_START)  # nothing to call


def test_installed_observers_see_each_point_in_order_until_uninstalled() -> None:
    seen: list[tuple[str, Point]] = []
    first, second = Recorder(seen, "first"), Recorder(seen, "second")
    install(first)
    try:
        with installed(second):
            reach(Point.AFTER_READ)
        reach(Point.AFTER_COMMIT)
    finally:
        uninstall(first)
    uninstall(first)  # no longer there: nothing to do
    reach(Point.CHUNK_START)
    assert seen == [
        ("first", Point.AFTER_READ),
        ("second", Point.AFTER_READ),
        ("first", Point.AFTER_COMMIT),
    ]


def test_an_observer_that_raises_fails_the_job_there_and_is_uninstalled_after(
    tmp_path: Path,
) -> None:
    (tmp_path / "before_commit.fail").touch()
    with pausing(tmp_path), pytest.raises(RuntimeError, match="before_commit"):
        reach(Point.BEFORE_COMMIT)
    assert observe._observers == []
    reach(Point.BEFORE_COMMIT)  # armed once: gone


def test_job_specs_and_tasks_carry_no_observer() -> None:
    for spec in (ChunkJobSpec, StreamJobSpec, ChunkTask):
        assert "probe" not in {f.name for f in dataclasses.fields(spec)}


def product_files() -> list[Path]:
    return [path for top in PRODUCT for path in sorted((REPO / top).rglob("*.py"))]


def test_the_product_names_no_test_hook() -> None:
    found = [
        f"{path.relative_to(REPO)}: {name}"
        for path in product_files()
        for name in TEST_HOOK_NAMES
        if name in observed_names(path)
    ]
    assert found == []


def observed_names(path: Path) -> set[str]:
    """The names, attributes and string constants of a module (not its prose)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.update(part for part in node.value.replace(":", " ").split() if part)
        elif isinstance(node, ast.alias):
            names.update(node.name.split("."))
    return names


def environment_driven_imports(source: str) -> list[str]:
    """The dynamic imports of a module that also reads the environment, and those whose
    module name is no literal, f-string or constant of the module's own."""
    tree = ast.parse(source)
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _called(node) in DYNAMIC_IMPORTS
    ]
    reads_environment = any(
        isinstance(node, ast.Attribute | ast.Name)
        and (getattr(node, "attr", None) or getattr(node, "id", None)) in {"environ", "getenv"}
        for node in ast.walk(tree)
    )
    return [f"line {call.lineno}: {_called(call)}" for call in calls if reads_environment]


def _called(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def test_no_product_module_imports_what_the_environment_names() -> None:
    found = [
        f"{path.relative_to(REPO)} {hit}"
        for path in product_files()
        for hit in environment_driven_imports(path.read_text())
    ]
    assert found == []


def test_the_scan_finds_an_import_the_environment_names() -> None:
    planted = (
        "import importlib, os\ndef load():\n    return importlib.import_module(os.environ['X'])\n"
    )
    assert environment_driven_imports(planted) == ["line 3: import_module"]
    assert environment_driven_imports("import importlib\nimportlib.import_module('json')\n") == []


def hook_process(environ: dict[str, str]) -> list[str]:
    """The observers a fresh Python process holds once started with ``environ``."""
    code = (
        "import json, airflow_cdc.observe as o\n"
        "print(json.dumps([type(x).__name__ for x in o._observers]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=environ,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return list(json.loads(done.stdout))


def test_the_start_up_hook_installs_pause_points_where_a_folder_is_named(
    tmp_path: Path,
) -> None:
    base = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", PAUSE_DIR_ENV}}
    assert hook_process({**base, **pause_environment(tmp_path, base)}) == ["PausePoints"]
    assert hook_process(base) == []
    # The hook's folder on the path without a pause folder: nothing installed.
    assert hook_process({**base, "PYTHONPATH": str(PAUSE_SITE)}) == []


def test_the_start_up_hook_runs_the_sitecustomize_it_shadows(tmp_path: Path) -> None:
    shadowed = tmp_path / "site"
    shadowed.mkdir()
    (shadowed / "sitecustomize.py").write_text(
        "import pathlib\npathlib.Path(__file__).with_name('ran').touch()\n"
    )
    base = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", PAUSE_DIR_ENV}}
    environ = {**base, **pause_environment(tmp_path, {"PYTHONPATH": str(shadowed)})}
    assert environ["PYTHONPATH"].split(os.pathsep) == [str(PAUSE_SITE), str(shadowed)]
    assert hook_process(environ) == ["PausePoints"]
    assert (shadowed / "ran").exists()
