"""What the provider's wheel holds: the package and the entry scripts spark-submit runs
(``spark_jobs/``, shipped as ``airflow_cdc/spark_jobs``), and none of the repository's
tools (``devtools/``), tests, DAGs or benchmarks."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_wheel_ships_the_package_and_its_entry_scripts_only(tmp_path: Path) -> None:
    uv = shutil.which("uv")
    command = [uv] if uv else [sys.executable, "-m", "uv"]
    subprocess.run(
        [*command, "build", "--wheel", "--quiet", "--out-dir", str(tmp_path), str(REPO)],
        check=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("airflow_cdc-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names if not name.endswith(".dist-info/")}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"airflow_cdc"}
    scripts = sorted(n for n in names if n.startswith("airflow_cdc/spark_jobs/"))
    assert scripts == [
        "airflow_cdc/spark_jobs/snapshot_chunk.py",
        "airflow_cdc/spark_jobs/stream.py",
    ]
    assert "airflow_cdc/operators/stream.py" in names
    assert "airflow_cdc/metadata/migrations/script.py.mako" in names
    assert not [n for n in names if "devtools" in n or "pause" in n or "sitecustomize" in n]
