"""SnapshotChunkOperator: secrets only in a private job file, never on the command line.

A fake ``spark-submit`` (a shell script) records what it was given: argv, environment and
the job file's mode and contents while the "job" runs.
"""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.config import AirflowTask, ChunkJobSpec
from airflow_cdc.errors import ConfigurationError
from airflow_cdc.operators.snapshot import (
    SNAPSHOT_CHUNK_APPLICATION,
    SnapshotChunkOperator,
)

PASSWORD = "Top-Secret-Pw-123"
META_PASSWORD = "Meta-Secret-456"
UNIT = {
    "chunk_ids": [7, 8, 9],
    "plan_id": 3,
    "tables": 3,
    "estimated_rows": 6000,
    "label": "shop: 3 tables, a..c",
}

FAKE_SPARK_SUBMIT = """#!/bin/sh
out="$CDC_FAKE_OUT"
printf '%s\\n' "$@" > "$out/argv"
env > "$out/env"
job=""
prev=""
for a in "$@"; do
  if [ "$prev" = "--job-file" ]; then job="$a"; fi
  prev="$a"
done
stat -c '%a' "$job" > "$out/file_mode"
stat -c '%a' "$(dirname "$job")" > "$out/dir_mode"
cp "$job" "$out/job.json"
echo "$job" > "$out/job_path"
exit "${CDC_FAKE_EXIT:-0}"
"""


@pytest.fixture
def fake_spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = tmp_path / "spark-submit"
    script.write_text(FAKE_SPARK_SUBMIT)
    script.chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setenv("CDC_FAKE_OUT", str(out))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[1]"}')
    monkeypatch.setenv("AIRFLOW_CONN_CDC_SOURCE", f"mysql://cdc:{PASSWORD}@db.example:3306/")
    monkeypatch.setenv(
        "AIRFLOW_CONN_CDC_METADATA", f"postgresql://meta:{META_PASSWORD}@pg.example/cdc"
    )
    return script


def _operator(script: Path, **kwargs: Any) -> SnapshotChunkOperator:
    return SnapshotChunkOperator(
        task_id="snapshot_chunk",
        unit=dict(UNIT),
        sink_path="/data/lake",
        spark_binary=str(script),
        **kwargs,
    )


def test_submit_passes_only_the_job_file(fake_spark: Path, tmp_path: Path) -> None:
    op = _operator(fake_spark, partition_rows="5000", env_vars={"EXTRA": "1"})
    op.execute({})  # type: ignore[arg-type]
    out = tmp_path / "out"
    argv = (out / "argv").read_text().splitlines()
    job_path = (out / "job_path").read_text().strip()
    assert argv[-3:] == [SNAPSHOT_CHUNK_APPLICATION, "--job-file", job_path]
    assert argv[:2] == ["--master", "local[1]"]
    assert "spark.ui.enabled=false" in argv
    assert "airflow-cdc shop: 3 tables, a..c" in argv  # --name
    cmdline = "\n".join(argv)
    assert PASSWORD not in cmdline
    assert META_PASSWORD not in cmdline
    # private file in a private folder, while the job runs ...
    assert (out / "file_mode").read_text().strip() == "600"
    assert (out / "dir_mode").read_text().strip() == "700"
    spec = json.loads((out / "job.json").read_text())
    assert spec["chunk_ids"] == [7, 8, 9]
    assert spec["source"]["password"] == PASSWORD
    assert spec["metadata_url"] == f"postgresql://meta:{META_PASSWORD}@pg.example/cdc"
    assert spec["sink"]["root"] == "/data/lake"
    assert spec["read"]["partition_rows"] == 5000
    assert spec["airflow_task"]["dag_id"] == ""  # run without a task instance
    # ... and gone afterwards
    assert not Path(job_path).exists()
    assert not Path(job_path).parent.exists()
    env = dict(line.split("=", 1) for line in (out / "env").read_text().splitlines() if "=" in line)
    assert env["EXTRA"] == "1"
    assert env["PYSPARK_PYTHON"]
    assert env["SPARK_HOME"]


def test_the_job_names_the_task_instance_it_runs_for(fake_spark: Path, tmp_path: Path) -> None:
    """The chunks' attempts record it (the CDC page links to it)."""
    from types import SimpleNamespace

    ti = SimpleNamespace(
        dag_id="mysql_cdc", run_id="manual__1", task_id="snapshot_chunk", map_index=4
    )
    _operator(fake_spark).execute({"ti": ti})  # type: ignore[typeddict-item]
    spec = json.loads((tmp_path / "out" / "job.json").read_text())
    assert spec["airflow_task"] == {
        "dag_id": "mysql_cdc",
        "run_id": "manual__1",
        "task_id": "snapshot_chunk",
        "map_index": 4,
    }
    assert ChunkJobSpec.from_json(spec).airflow_task == AirflowTask(
        "mysql_cdc", "manual__1", "snapshot_chunk", 4
    )


def test_a_unit_without_chunks_submits_nothing(fake_spark: Path, tmp_path: Path) -> None:
    unit = {"plan_id": 3, "chunk_ids": [], "tables": 2, "label": "no snapshot (latest)"}
    op = SnapshotChunkOperator(
        task_id="snapshot_chunk", unit=unit, sink_path="/data/lake", spark_binary=str(fake_spark)
    )
    op.execute({})  # type: ignore[arg-type]
    assert not (tmp_path / "out" / "argv").exists()


def test_job_file_removed_when_spark_fails(
    fake_spark: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CDC_FAKE_EXIT", "3")
    op = _operator(fake_spark)
    with pytest.raises(Exception, match="Error code is: 3") as info:
        op.execute({})  # type: ignore[arg-type]
    assert PASSWORD not in str(info.value)
    job_path = Path((tmp_path / "out" / "job_path").read_text().strip())
    assert not job_path.parent.exists()


def test_on_kill_removes_job_file(fake_spark: Path) -> None:
    op = _operator(fake_spark)
    path = op.prepare_submit()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert op.application_args == ["--job-file", str(path)]
    assert op.job_file() == path
    op.on_kill()
    assert not path.parent.exists()
    assert op.job_file() is None


def test_default_binary_is_the_installed_pyspark(fake_spark: Path) -> None:
    """No binary named: the provider runs ``spark-submit`` from the PATH it is given, the
    installed pyspark's ``bin`` first."""
    from airflow_cdc.spark.environment import spark_submit_binary

    op = SnapshotChunkOperator(task_id="t", unit=dict(UNIT), sink_path="/lake")
    op.prepare_submit()
    try:
        assert shutil.which("spark-submit", path=op.env_vars["PATH"]) == spark_submit_binary()
    finally:
        op._cleanup()


def test_application_ships_inside_the_package() -> None:
    import airflow_cdc

    app = Path(SNAPSHOT_CHUNK_APPLICATION)
    assert app.is_file()
    assert app.is_relative_to(Path(airflow_cdc.__file__).parent)
    # Nothing else in the script's folder (it goes first on sys.path).
    assert sorted(p.name for p in app.parent.glob("*.py")) == ["snapshot_chunk.py", "stream.py"]
    assert "airflow_cdc.spark.snapshot_job import main" in app.read_text()


def test_bad_unit_or_args_are_configuration_errors(fake_spark: Path) -> None:
    for unit in ({"label": "x"}, {"chunk_ids": []}, {"chunk_ids": [1, "2"]}, {"chunk_ids": 7}):
        with pytest.raises(ConfigurationError, match="chunk_ids"):
            SnapshotChunkOperator(task_id="t", unit=unit, sink_path="/lake").build_spec()
    with pytest.raises(ConfigurationError, match="partition_rows"):
        _operator(fake_spark, partition_rows="-1").build_spec()
    with pytest.raises(ConfigurationError, match="application_args"):
        _operator(fake_spark, application_args=["--password", "x"])


def test_map_index_template_renders_the_label() -> None:
    import jinja2

    op = SnapshotChunkOperator(task_id="t", unit=dict(UNIT), sink_path="/lake")
    assert op.map_index_template is not None
    rendered = jinja2.Environment().from_string(op.map_index_template).render(task=op)
    assert rendered == UNIT["label"]
    assert "sink_path" in op.template_fields
    assert "application" in op.template_fields
