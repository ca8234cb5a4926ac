"""Which pyspark the jobs' Python processes import (``spark.environment``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from airflow_cdc.spark.environment import bundled_pyspark_zips, spark_environment


def _site(root: Path) -> Path:
    site = root / "site"
    (site / "pyspark" / "python" / "lib").mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    return site


def test_the_zips_inside_the_installed_package_are_dropped(tmp_path: Path) -> None:
    site = _site(tmp_path)
    lib = site / "pyspark" / "python" / "lib"
    path = [str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip"), "/app", str(site)]
    assert bundled_pyspark_zips(path) == path[:2]


def test_a_separate_spark_install_is_left_alone(tmp_path: Path) -> None:
    site = _site(tmp_path)
    other = tmp_path / "spark-4.2.0" / "python" / "lib"
    path = [str(other / "pyspark.zip"), str(other / "py4j-0.10.9.9-src.zip"), str(site)]
    assert bundled_pyspark_zips(path) == []


def test_nothing_is_dropped_without_an_installed_package(tmp_path: Path) -> None:
    lib = tmp_path / "pyspark" / "python" / "lib"
    assert bundled_pyspark_zips([str(lib / "pyspark.zip"), str(tmp_path / "empty")]) == []


def test_a_process_with_sparks_pythonpath_imports_the_installed_package() -> None:
    """The real layout: a Python process started as Spark starts the driver and the worker
    daemon (the package's zips first on PYTHONPATH) imports pyspark from the package."""
    lib = Path(spark_environment()["SPARK_HOME"]) / "python" / "lib"
    zips = sorted(str(p) for p in lib.glob("*.zip"))
    assert any(Path(z).name == "pyspark.zip" for z in zips), f"no pyspark.zip in {lib}"
    script = (
        "import sys\n"
        "from airflow_cdc.spark.environment import prefer_installed_pyspark\n"
        "before = [p for p in sys.path if p.endswith('pyspark.zip')]\n"
        "dropped = prefer_installed_pyspark()\n"
        "import pyspark\n"
        "print(len(before), len(dropped), pyspark.__file__)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(zips)}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[:2] == ["1", str(len(zips))]
    assert ".zip" not in out[2]
    assert Path(out[2]).parent == lib.parent.parent
