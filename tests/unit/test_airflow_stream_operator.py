"""StreamOperator: job file only (0600, removed after), validated params, deterministic
stream id, and a kill that stops the job (gracefully if it can) without leaving processes.

A fake ``spark-submit`` (a shell script) records argv, environment and the job file; for
the kill tests it also starts a fake Python "driver" whose command line holds the
application path, like PySpark's driver process.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.errors import ConfigurationError
from airflow_cdc.operators.stream import (
    STREAM_APPLICATION,
    StreamOperator,
    default_checkpoint_dir,
    default_stream_id,
)

PASSWORD = "Top-Secret-Pw-123"
META_PASSWORD = "Meta-Secret-456"

FAKE_SPARK_SUBMIT = """#!/bin/sh
out="$CDC_FAKE_OUT"
printf '%s\\n' "$@" > "$out/argv"
env > "$out/env"
job=""
app=""
prev=""
for a in "$@"; do
  if [ "$prev" = "--job-file" ]; then job="$a"; fi
  if [ "$a" = "--job-file" ]; then app="$prev"; fi
  prev="$a"
done
stat -c '%a' "$job" > "$out/file_mode"
stat -c '%a' "$(dirname "$job")" > "$out/dir_mode"
cp "$job" "$out/job.json"
echo "$job" > "$out/job_path"
if [ -n "$CDC_FAKE_ERROR" ]; then
  printf '%s' "$CDC_FAKE_ERROR" > "$job.error"
  exit 2
fi
if [ -n "$CDC_FAKE_DRIVER" ]; then
  "$CDC_FAKE_PYTHON" "$CDC_FAKE_DRIVER" "$app" --job-file "$job" &
  wait $!
  exit $?
fi
exit "${CDC_FAKE_EXIT:-0}"
"""

FAKE_DRIVER = """
import os, pathlib, signal, sys, time
out = pathlib.Path(os.environ["CDC_FAKE_OUT"])
def stop(*_):
    (out / "stopped").write_text("graceful")
    sys.exit(0)
signal.signal(signal.SIGTERM, signal.SIG_IGN if os.environ.get("CDC_FAKE_IGNORE_TERM") else stop)
assert pathlib.Path(sys.argv[3]).is_file()  # the job file exists while the job runs
(out / "driver_pid").write_text(str(os.getpid()))
while True:
    time.sleep(0.05)
"""


@pytest.fixture
def out(tmp_path: Path) -> Path:
    folder = tmp_path / "out"
    folder.mkdir()
    return folder


@pytest.fixture
def fake_spark(tmp_path: Path, out: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = tmp_path / "spark-submit"
    script.write_text(FAKE_SPARK_SUBMIT)
    script.chmod(0o755)
    monkeypatch.setenv("CDC_FAKE_OUT", str(out))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[1]"}')
    monkeypatch.setenv("AIRFLOW_CONN_CDC_SOURCE", f"mysql://cdc:{PASSWORD}@db.example:3306/")
    monkeypatch.setenv(
        "AIRFLOW_CONN_CDC_METADATA", f"postgresql://meta:{META_PASSWORD}@pg.example/cdc"
    )
    return script


def _operator(script: Path, **kwargs: Any) -> StreamOperator:
    kwargs.setdefault("tables", ["shop.orders", "shop.order_items"])
    kwargs.setdefault("sink_path", "/data/lake")
    return StreamOperator(task_id="stream", spark_binary=str(script), **kwargs)


def _env(out: Path) -> dict[str, str]:
    lines = (out / "env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


# -- submission -----------------------------------------------------------------------------


def test_submit_passes_only_the_job_file(fake_spark: Path, out: Path) -> None:
    op = _operator(fake_spark, env_vars={"EXTRA": "1"}, bounds={"trigger_seconds": "0.5"})
    op.execute({})  # type: ignore[arg-type]
    argv = (out / "argv").read_text().splitlines()
    job_path = (out / "job_path").read_text().strip()
    assert argv[-3:] == [STREAM_APPLICATION, "--job-file", job_path]
    assert argv[:2] == ["--master", "local[1]"]
    stream_id = default_stream_id(["shop.orders", "shop.order_items"])
    assert f"airflow-cdc stream {stream_id}" in argv  # --name
    cmdline = "\n".join(argv)
    assert PASSWORD not in cmdline
    assert META_PASSWORD not in cmdline
    assert (out / "file_mode").read_text().strip() == "600"
    assert (out / "dir_mode").read_text().strip() == "700"
    spec = json.loads((out / "job.json").read_text())
    assert spec["stream_id"] == stream_id
    assert spec["tables"] == ["shop.orders", "shop.order_items"]
    assert spec["mode"] == "continuous"
    assert spec["bounds"]["trigger_seconds"] == 0.5
    assert spec["sink"]["root"] == "/data/lake"
    assert spec["checkpoint_dir"] == default_checkpoint_dir("/data/lake", stream_id)
    assert spec["source"]["password"] == PASSWORD
    assert spec["metadata_url"] == f"postgresql://meta:{META_PASSWORD}@pg.example/cdc"
    assert not Path(job_path).exists()
    assert not Path(job_path).parent.exists()
    env = _env(out)
    assert env["EXTRA"] == "1"
    assert env["PYSPARK_PYTHON"]
    assert env["SPARK_HOME"]


def test_job_file_removed_when_spark_fails(
    fake_spark: Path, out: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CDC_FAKE_EXIT", "3")
    with pytest.raises(Exception, match="Error code is: 3") as info:
        _operator(fake_spark).execute({})  # type: ignore[arg-type]
    assert PASSWORD not in str(info.value)
    assert not Path((out / "job_path").read_text().strip()).parent.exists()


def test_the_task_fails_with_the_jobs_own_error(
    fake_spark: Path, out: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job left its error next to the job file: the task raises it (same class, same
    words), not spark-submit's exit code."""
    from airflow_cdc.errors import StreamLeaseError

    reason = "stream s1 for tables shop.orders is already running (owner h:1); stop it first"
    monkeypatch.setenv("CDC_FAKE_ERROR", f"StreamLeaseError: {reason}")
    with pytest.raises(StreamLeaseError) as info:
        _operator(fake_spark).execute({})  # type: ignore[arg-type]
    assert str(info.value) == reason
    assert "Error code is: 2" in str(info.value.__cause__)
    assert not Path((out / "job_path").read_text().strip()).parent.exists()


def test_explicit_values_and_rendered_strings(fake_spark: Path) -> None:
    op = _operator(
        fake_spark,
        tables='["shop.orders", "`shop`.`orders`", "`shop`.`pay``ments`"]',
        sink_path="s3://bucket/lake/",
        stream_mode=" until_caught_up ",
        stream_id="orders-stream",
        checkpoint_dir="/ckpt/orders",
        bounds={
            "trigger_seconds": 5,
            "max_batch_bytes": "1048576",
            "block_rows": "1000",
            "max_merge_rows": 20_000,
        },
    )
    spec = op.build_spec()
    assert spec.tables == ("shop.orders", "shop.`pay``ments`")
    assert spec.mode == "until_caught_up"
    assert spec.stream_id == "orders-stream"
    assert spec.checkpoint_dir == "/ckpt/orders"
    assert spec.bounds.trigger_seconds == 5.0
    assert spec.bounds.max_batch_bytes == 1048576
    assert (spec.bounds.block_rows, spec.bounds.max_merge_rows) == (1000, 20_000)
    assert spec.sink.root == "s3://bucket/lake/"
    defaulted = _operator(fake_spark, sink_path="s3://bucket/lake/", stream_id="a:b/c").build_spec()
    # A local folder of the driver (Spark needs Hadoop's S3 client for s3://, and the
    # stream resumes from the metadata DB without its checkpoint anyway).
    assert defaulted.checkpoint_dir == os.path.join(
        tempfile.gettempdir(), "airflow-cdc", "checkpoints", "a~3Ab~2Fc"
    )


def test_stream_mode_is_validated(fake_spark: Path) -> None:
    with pytest.raises(ConfigurationError, match="stream_mode must be one of continuous"):
        _operator(fake_spark, stream_mode="forever")  # a literal: when the DAG is parsed
    templated = _operator(fake_spark, stream_mode="{{ params.stream_mode }}")
    templated.stream_mode = "once"  # what rendering produced
    with pytest.raises(ConfigurationError, match="got 'once'"):
        templated.build_spec()
    templated.stream_mode = "until_caught_up"
    assert templated.build_spec().mode == "until_caught_up"


def test_snapshot_only_skips_the_stream_before_spark_submit(fake_spark: Path, out: Path) -> None:
    from airflow.sdk.exceptions import AirflowSkipException

    with pytest.raises(ConfigurationError, match="startup_mode must be one of"):
        _operator(fake_spark, startup_mode="snapshot")
    op = _operator(fake_spark, startup_mode="{{ params.startup_mode }}")
    op.startup_mode = "snapshot_only"  # what rendering produced
    with pytest.raises(AirflowSkipException, match="snapshot_only"):
        op.execute({})  # type: ignore[arg-type]
    assert not (out / "argv").exists()  # no spark-submit


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tables": []}, "tables is empty"),
        ({"tables": ["nodot"]}, "database.table"),
        ({"tables": "[1, 2]"}, "list of strings"),
        ({"sink_path": ""}, "sink_path is empty"),
        ({"bounds": {"trigger_seconds": "0"}}, "trigger_seconds"),
        ({"bounds": {"trigger_seconds": "soon"}}, "trigger_seconds"),
        ({"bounds": {"trigger_seconds": float("inf")}}, "trigger_seconds"),
        ({"bounds": {"max_batch_bytes": "-5"}}, "max_batch_bytes"),
        ({"bounds": {"block_rows": "0"}}, "block_rows"),
        ({"bounds": {"lease_seconds": "1"}}, "lease_seconds must be at least 5"),
        ({"bounds": {"lease_seconds": float("nan")}}, "lease_seconds must be a positive"),
        (
            {"bounds": {"block_rows": 100, "max_merge_rows": 10}},
            "max_merge_rows at least block_rows",
        ),
        ({"bounds": {"max_batch_mb": 5}}, "bounds has no setting max_batch_mb"),
        ({"bounds": "[1]"}, "bounds must be a mapping"),
        ({"discovery": {"patterns": ["a.*"]}}, "discovery takes no patterns"),
        ({"stream_id": "x" * 201}, "at most 200"),
    ],
)
def test_bad_params_are_configuration_errors(
    fake_spark: Path, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        _operator(fake_spark, **kwargs).build_spec()


def test_application_args_cannot_be_passed(fake_spark: Path) -> None:
    with pytest.raises(ConfigurationError, match="application_args"):
        _operator(fake_spark, application_args=["--password", "x"])


def test_default_stream_id_is_deterministic() -> None:
    names = ["shop.orders", "shop.order_items"]
    expected = "mysql_cdc:" + hashlib.sha256(b"shop.order_items\nshop.orders").hexdigest()[:12]
    assert default_stream_id(names) == expected
    assert default_stream_id(list(reversed(names))) == expected
    assert default_stream_id(["`shop`.`orders`", " shop.order_items", "shop.orders"]) == expected
    assert re.fullmatch(r"mysql_cdc:[0-9a-f]{12}", expected)
    assert default_stream_id(["shop.orders"]) != expected
    # and in a fresh interpreter (no per-process hash seed involved)
    import subprocess

    code = (
        "from airflow_cdc.operators.stream import default_stream_id as d;"
        "print(d(['shop.orders', 'shop.order_items']))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == expected


def test_template_fields_and_application() -> None:
    import airflow_cdc

    op = StreamOperator(task_id="t", tables=["a.b"], sink_path="/lake")
    for name in ("tables", "sink_path", "stream_mode", "stream_id", "checkpoint_dir"):
        assert name in op.template_fields
    assert "application" in op.template_fields
    assert op.application == STREAM_APPLICATION
    app = Path(STREAM_APPLICATION)
    assert app.is_file()
    assert app.is_relative_to(Path(airflow_cdc.__file__).parent)
    assert "from airflow_cdc.spark.stream_job import main" in app.read_text()
    # One script: the package's spark_jobs is the repository's, shipped in the wheel.
    assert app.resolve() == Path(__file__).resolve().parents[2] / "spark_jobs" / "stream.py"


def test_default_binary_is_the_installed_pyspark(fake_spark: Path) -> None:
    from airflow_cdc.spark.environment import spark_submit_binary

    op = StreamOperator(task_id="t", tables=["a.b"], sink_path="/lake")
    path = op.prepare_submit()
    try:
        assert shutil.which("spark-submit", path=op.env_vars["PATH"]) == spark_submit_binary()
        assert op.application_args == ["--job-file", str(path)]
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    finally:
        op._cleanup()
    assert not path.parent.exists()


# -- kill -----------------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _run_and_kill(op: StreamOperator, out: Path) -> tuple[int, float, BaseException | None]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            op.execute({})  # type: ignore[arg-type]
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 30
    while not (out / "driver_pid").exists():
        assert time.monotonic() < deadline, "the fake driver did not start"
        assert thread.is_alive(), errors
        time.sleep(0.05)
    driver = int((out / "driver_pid").read_text())
    job_path = Path((out / "job_path").read_text().strip())
    assert job_path.exists()
    started = time.monotonic()
    op.on_kill()
    took = time.monotonic() - started
    thread.join(30)
    assert not thread.is_alive()
    assert not job_path.parent.exists()
    return driver, took, errors[0] if errors else None


@pytest.fixture
def with_driver(out: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    driver = tmp_path / "driver.py"
    driver.write_text(FAKE_DRIVER)
    monkeypatch.setenv("CDC_FAKE_DRIVER", str(driver))
    monkeypatch.setenv("CDC_FAKE_PYTHON", sys.executable)


@pytest.mark.usefixtures("with_driver")
def test_on_kill_stops_the_driver_gracefully(fake_spark: Path, out: Path) -> None:
    driver, took, _ = _run_and_kill(_operator(fake_spark, stop_timeout_seconds=20), out)
    assert (out / "stopped").read_text() == "graceful"
    assert took < 10
    assert not _alive(driver)


@pytest.mark.usefixtures("with_driver")
def test_on_kill_kills_a_driver_that_does_not_stop(
    fake_spark: Path, out: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CDC_FAKE_IGNORE_TERM", "1")
    driver, took, error = _run_and_kill(_operator(fake_spark, stop_timeout_seconds=0.5), out)
    assert not (out / "stopped").exists()
    assert took < 10
    assert error is not None  # spark-submit was killed: the task fails
    deadline = time.monotonic() + 5
    while _alive(driver) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(driver), "the driver outlived spark-submit"


def test_an_unwritable_lake_fails_the_stream_task_before_spark_submit(
    fake_spark: Path, out: Path, tmp_path: Path
) -> None:
    """The stream task checks the lake (and its staging area) like the plan task: no job
    file is written and spark-submit is not started."""
    op = _operator(fake_spark, sink_path="/proc/cdc-lake")
    with pytest.raises(ConfigurationError, match="sink_path '/proc/cdc-lake' is not writable"):
        op.execute({})  # type: ignore[arg-type]
    staged = _operator(fake_spark, sink_path=str(tmp_path / "lake"), staging_path="/proc/stage")
    with pytest.raises(ConfigurationError, match="staging_path '/proc/stage' is not writable"):
        staged.execute({})  # type: ignore[arg-type]
    assert not (out / "argv").exists()


def test_patterns_resolve_at_start_and_travel_for_new_tables(
    fake_spark: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from airflow_cdc.metadata import MetadataStore
    from airflow_cdc.model import BinlogPosition, ChunkRange, TableId, TablePlan
    from airflow_cdc.source import catalog, connection

    found = [TableId("shop", "a"), TableId("shop", "b"), TableId("shop", "new")]
    meta = f"sqlite:///{tmp_path / 'meta.db'}"
    monkeypatch.setenv("AIRFLOW_CONN_CDC_METADATA", meta)
    with MetadataStore.connect(meta) as store:
        every_key = (ChunkRange(None, None),)
        record = store.plans.create(
            "run", [TablePlan(t, ("id",), every_key, 1, "single") for t in found[:2]]
        )
        for chunk in record.chunks:  # shop.a and shop.b done; shop.new never planned
            store.chunks.start(chunk.chunk_id)
            position = BinlogPosition("mysql-bin.000001", 4)
            store.chunks.finish(chunk.chunk_id, low=position, high=position, rows=1)

    class Conn:
        def close(self) -> None: ...

    monkeypatch.setattr(connection, "connect", lambda cfg, **_: Conn())
    monkeypatch.setattr(catalog, "resolve_selection", lambda conn, selection: list(found))
    op = _operator(
        fake_spark,
        tables='["shop.*"]',
        exclude_tables=["shop.audit"],
        discovery='{"chunk_rows": "5000", "discover_seconds": "2.5"}',
    )
    spec = op.build_spec()
    assert spec.tables == ("shop.a", "shop.b")  # shop.new: the stream snapshots it itself
    assert (spec.discovery.patterns, spec.discovery.exclude_patterns) == (
        ("shop.*",),
        ("shop.audit",),
    )
    assert (spec.discovery.chunk_rows, spec.discovery.discover_seconds) == (5000, 2.5)
    # The default id names the patterns, so it stays as tables come and go.
    found.append(TableId("shop", "c"))
    assert (
        op.build_spec().stream_id == spec.stream_id == default_stream_id(["shop.*"], ["shop.audit"])
    )
    exact = _operator(fake_spark, tables=["shop.a"]).build_spec()
    assert (exact.discovery.patterns, exact.discovery.exclude_patterns) == ((), ())


def test_the_driver_is_found_by_its_script_through_links(tmp_path: Path) -> None:
    """spark-submit hands the driver the script's canonical path; the operator's default
    application is a link in a source tree (``airflow_cdc/spark_jobs``)."""
    from airflow_cdc.operators._graceful_stop import is_driver

    script = tmp_path / "jobs" / "stream.py"
    script.parent.mkdir()
    script.write_text("")
    (tmp_path / "linked").symlink_to(script.parent)

    class Process:
        def __init__(self, *args: str) -> None:
            self.args = list(args)

        def cmdline(self) -> list[str]:
            return self.args

    linked = str(tmp_path / "linked" / "stream.py")
    assert is_driver(Process("python", str(script), "--job-file", "j"), linked)
    assert is_driver(Process("python", linked), linked)
    assert not is_driver(Process("python", str(tmp_path / "other.py")), linked)


@pytest.mark.parametrize("mode", ["position", "timestamp", "latest", "initial"])
def test_every_mode_but_snapshot_only_streams(fake_spark: Path, out: Path, mode: str) -> None:
    """The stream task takes the mode alone (the plan took its position or time)."""
    op = _operator(fake_spark, startup_mode=mode, stream_mode="until_caught_up")
    op.execute({})  # type: ignore[arg-type]
    assert (out / "argv").exists()  # spark-submit ran
