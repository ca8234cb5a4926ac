"""Helpers that drive the real parts directly (planner, metadata DB, chunk job, sink)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from airflow_cdc.config import ChunkingConfig, ChunkJobSpec, ReadConfig, SinkConfig, SourceConfig
from airflow_cdc.model import BinlogPosition, TableId, TableSchema
from airflow_cdc.spark.environment import JOB_JVM_CONF, spark_environment, spark_submit_binary
from devtools.local_mariadb import LocalMariaDB
from tests.support.pause_points import pause_environment, pausing

REPO = Path(__file__).resolve().parents[2]
SNAPSHOT_SCRIPT = REPO / "spark_jobs" / "snapshot_chunk.py"
STREAM_SCRIPT = REPO / "spark_jobs" / "stream.py"


def source_config(server: LocalMariaDB) -> SourceConfig:
    return SourceConfig(
        host="127.0.0.1", port=server.port, user="cdc", password=server.cdc_password
    )


def server_position(cfg: SourceConfig, epoch: int = 0) -> BinlogPosition:
    """The server's current binlog position (a transaction boundary), in ``epoch``."""
    from airflow_cdc.model import ServerEpoch
    from airflow_cdc.source.connection import connect
    from airflow_cdc.source.server import current_position, server_info

    conn = connect(cfg)
    try:
        info = server_info(conn)
        return current_position(conn, info.in_epoch(ServerEpoch(info.server_id, epoch)))
    finally:
        conn.close()


def table_schemas(server: LocalMariaDB, *tables: TableId) -> dict[TableId, TableSchema]:
    """The tables' schemas as the catalog has them now (one connection)."""
    from airflow_cdc.source.catalog import load_table_schema
    from airflow_cdc.source.connection import connect

    conn = connect(source_config(server))
    try:
        return {table: load_table_schema(conn, table) for table in tables}
    finally:
        conn.close()


def table_schema(server: LocalMariaDB, table: TableId) -> TableSchema:
    """One table's schema as the catalog has it now."""
    return table_schemas(server, table)[table]


def plan(server: LocalMariaDB, tables: Sequence[str], chunk_rows: int, metadata_url: str) -> Any:
    """Validate, plan and record a snapshot plan; returns the PlanRecord."""
    from airflow_cdc.metadata import MetadataStore
    from airflow_cdc.planning.planner import plan_tables
    from airflow_cdc.source.catalog import load_table_schema
    from airflow_cdc.source.connection import connect
    from airflow_cdc.source.server import server_info
    from airflow_cdc.source.validation import validate_source

    ids = [TableId.parse(t) for t in tables]
    conn = connect(source_config(server))
    try:
        info = server_info(conn)
        validate_source(conn, info, ids)
        schemas = [load_table_schema(conn, t) for t in ids]
        plans = plan_tables(conn, info, schemas, ChunkingConfig(chunk_rows=chunk_rows))
    finally:
        conn.close()
    return MetadataStore.connect(metadata_url).plans.create("test", plans)


def job_spec(
    server: LocalMariaDB,
    chunk_id: int,
    metadata_url: str,
    sink_root: Path | str,
    partition_rows: int = 250_000,
    engine: str = "connectorx",
    storage_options: Mapping[str, str] | None = None,
    columns_wait_seconds: float = 600.0,
) -> ChunkJobSpec:
    return ChunkJobSpec(
        chunk_ids=(chunk_id,),
        source=source_config(server),
        metadata_url=metadata_url,
        sink=SinkConfig(str(sink_root), storage_options=storage_options or {}),
        read=ReadConfig(
            partition_rows=partition_rows,
            engine=engine,
            columns_wait_seconds=columns_wait_seconds,
        ),
    )


def run_chunk_pausing(spec: ChunkJobSpec, pause_dir: Path) -> Any:
    """``run_chunk`` in this process, pausing at the points armed in ``pause_dir``."""
    from airflow_cdc.snapshot.unit import run_chunk

    with pausing(pause_dir):
        return run_chunk(spec)


def run_spark_submit(
    script: Path,
    arguments: Sequence[str],
    log_path: Path,
    *,
    master: str = "local[2]",
    wrapper: Sequence[str] = (),
    pause_dir: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Run a script with the real spark-submit (``master``: local[2] unless a caller, such
    as the benchmark of one against two cores, asks otherwise) in its own process group;
    ``wrapper``: a command that runs it (``container_like``); ``pause_dir``: its driver
    pauses at the points armed there."""
    env = dict(os.environ)
    env.update(spark_environment())
    if pause_dir is not None:
        env.update(pause_environment(pause_dir, env))
    log = open(log_path, "ab")  # noqa: SIM115
    return subprocess.Popen(
        [
            *wrapper,
            spark_submit_binary(),
            "--master",
            master,
            "--conf",
            "spark.ui.enabled=false",
            *(arg for name, value in JOB_JVM_CONF.items() for arg in ("--conf", f"{name}={value}")),
            str(script),
            *arguments,
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def spark_submit(
    spec: ChunkJobSpec, workdir: Path, pause_dir: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start one chunk job (pausing at the points armed in ``pause_dir``); its log is
    ``spark-<chunk id>.log``."""
    job_file = spec.write(workdir / f"job-{spec.chunk_ids[0]}-{time.monotonic_ns()}.json")
    log_path = workdir / f"spark-{spec.chunk_ids[0]}.log"
    return run_spark_submit(
        SNAPSHOT_SCRIPT, ["--job-file", str(job_file)], log_path, pause_dir=pause_dir
    )


@contextlib.contextmanager
def killed_on_exit(job: subprocess.Popen[bytes]) -> Iterator[subprocess.Popen[bytes]]:
    """``job``, killed on the way out if it still runs (so a failed assertion leaves no JVM
    behind)."""
    try:
        yield job
    finally:
        if job.poll() is None:
            kill_group(job)


def chunk_job(
    spec: ChunkJobSpec, workdir: Path, pause_dir: Path | None = None
) -> contextlib.AbstractContextManager[Any]:
    """:func:`spark_submit` under :func:`killed_on_exit`."""
    return killed_on_exit(spark_submit(spec, workdir, pause_dir))


def arm(pause_dir: Path, *points: str) -> Path:
    """Create the pause folder with the named pause points armed."""
    pause_dir.mkdir(exist_ok=True)
    for point in points:
        (pause_dir / f"{point}.pause").touch()
    return pause_dir


def wait_for(
    path: Path, process: subprocess.Popen[bytes] | None = None, timeout: float = 180
) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process is not None and process.poll() is not None:
            raise AssertionError(f"job exited with {process.returncode} before {path.name}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {path}")
        time.sleep(0.05)


def kill_group(process: subprocess.Popen[bytes]) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def signal_stream_driver(job: subprocess.Popen[bytes]) -> int:
    """SIGTERM to the stream's Python driver, as ``StreamOperator.on_kill`` sends it (the
    JVM would die of a SIGTERM to the whole group): it stops after its batch. Returns how
    many processes were signalled (0 once the job has ended)."""
    import psutil

    signalled = 0
    try:
        children = psutil.Process(job.pid).children(recursive=True)
    except psutil.Error:  # the job has ended
        return 0
    for process in children:
        try:
            if any(part.endswith("stream.py") for part in process.cmdline()):
                process.send_signal(signal.SIGTERM)
                signalled += 1
        except psutil.Error:  # a finished Python worker
            continue
    return signalled


def stop_stream(job: subprocess.Popen[bytes]) -> None:
    """:func:`signal_stream_driver` of a running job: exactly its one driver."""
    signalled = signal_stream_driver(job)
    assert signalled == 1, f"{signalled} stream drivers signalled"


def end_stream(job: subprocess.Popen[bytes] | None, timeout: float = 120) -> None:
    """Stop a job still running as its operator's ``on_kill`` does, and kill what is left
    after ``timeout`` (nothing to do for a job that ended)."""
    if job is None or job.poll() is not None:
        return
    stop_stream(job)
    try:
        job.wait(timeout=timeout)
    finally:
        if job.poll() is None:
            kill_group(job)


def source_rows(server: LocalMariaDB, sql: str, key: str = "id") -> dict[Any, dict[str, Any]]:
    conn = server.root(cursorclass=__import__("pymysql").cursors.DictCursor)
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return {row[key]: row for row in cur.fetchall()}
    finally:
        conn.close()


def dump(obj: Any) -> str:
    return json.dumps(obj, default=str, sort_keys=True)


def stream_spec(
    server: LocalMariaDB,
    tables: Sequence[str],
    metadata_url: str,
    sink_root: Path | str,
    checkpoint: Path,
    *,
    mode: str = "until_caught_up",
    stream_id: str = "test-stream",
    storage_options: Mapping[str, str] | None = None,
    **settings: Any,
) -> Any:
    """The stream's job spec; ``settings``: fields of its bounds (``start_batch_bytes``...),
    of its schema-change settings (``not_in_place``...) or of its discovery
    (``patterns``...)."""
    from airflow_cdc.config import (
        DiscoveryConfig,
        SchemaChangeConfig,
        StreamBounds,
        StreamJobSpec,
    )

    on_purged = settings.pop("on_purged", StreamJobSpec.on_purged)
    bound_names = {f.name for f in dataclasses.fields(StreamBounds)}
    change_names = {f.name for f in dataclasses.fields(SchemaChangeConfig)}
    bounds = {k: v for k, v in settings.items() if k in bound_names}
    changes = {k: v for k, v in settings.items() if k in change_names}
    discovery = {k: v for k, v in settings.items() if k not in bound_names | change_names}
    return StreamJobSpec(
        stream_id=stream_id,
        tables=tuple(tables),
        source=source_config(server),
        metadata_url=metadata_url,
        sink=SinkConfig(str(sink_root), storage_options=storage_options or {}),
        checkpoint_dir=str(checkpoint),
        mode=mode,
        # A short lease: a test that kills a stream restarts it after at most 15 s.
        bounds=StreamBounds(**{"trigger_seconds": 1.0, "lease_seconds": 15.0, **bounds}),
        discovery=DiscoveryConfig(**discovery),
        schema_changes=SchemaChangeConfig(**changes),
        on_purged=on_purged,
    )


def spark_submit_stream(
    spec: Any,
    workdir: Path,
    *,
    master: str = "local[2]",
    log_name: str = "stream.log",
    wrapper: Sequence[str] = (),
    pause_dir: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Start the stream job (on ``master``, in ``wrapper``, pausing at the points armed in
    ``pause_dir``, see :func:`run_spark_submit`); its log is ``log_name``."""
    job_file = spec.write(workdir / f"stream-{time.monotonic_ns()}.json")
    return run_spark_submit(
        STREAM_SCRIPT,
        ["--job-file", str(job_file)],
        workdir / log_name,
        master=master,
        wrapper=wrapper,
        pause_dir=pause_dir,
    )


def container_like(hostname: str, workdir: Path) -> list[str]:
    """A command prefix that runs a command as in a container of its own named
    ``hostname``: its own UTS namespace (host name), pid namespace (with its own ``/proc``),
    so no pid of one such "container" is seen from another, and mount namespace, where
    ``/etc/hosts`` also names ``hostname`` (as a container's does; Spark looks its host up).
    Root only."""
    hosts = workdir / f"hosts-{hostname}"
    hosts.write_text(f"{Path('/etc/hosts').read_text()}\n127.0.1.1 {hostname}\n")
    return [
        "unshare",
        "--uts",
        "--pid",
        "--fork",
        "--mount-proc",
        "--kill-child",
        "sh",
        "-c",
        'hostname "$0" && mount --bind "$1" /etc/hosts && shift && exec "$@"',
        hostname,
        str(hosts),
    ]


def snapshot_all(
    server: LocalMariaDB,
    record: Any,
    metadata_url: str,
    sink_root: Path | str,
    parallel: int = 2,
    engine: str = "connectorx",
    storage_options: Mapping[str, str] | None = None,
) -> None:
    """Run every chunk of a plan in-process (the chunk logic without a JVM per chunk)."""
    from concurrent.futures import ThreadPoolExecutor

    from airflow_cdc.snapshot.unit import run_chunk

    specs = [
        job_spec(
            server,
            chunk.chunk_id,
            metadata_url,
            sink_root,
            engine=engine,
            storage_options=storage_options,
        )
        for chunk in record.chunks
    ]
    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(run_chunk, specs))


def snapshot_table(server: LocalMariaDB, table: TableId, workdir: Path) -> tuple[str, Path]:
    """``table`` planned in chunks of 1,000 rows and snapshotted in-process into a lake
    under ``workdir``: the metadata URL and the lake."""
    meta, lake = f"sqlite:///{workdir / 'meta.db'}", workdir / "lake"
    snapshot_all(server, plan(server, [str(table)], 1000, meta), meta, lake)
    return meta, lake


def binlog_files(server: LocalMariaDB) -> list[str]:
    return [str(row[0]) for row in server.query("SHOW BINARY LOGS")]


def purge_all_binlogs_but_the_newest(server: LocalMariaDB, flushes: int = 3) -> str:
    """Rotate the binlog ``flushes`` times and purge every file before the newest; returns
    the newest (then the only, so the oldest) file."""
    server.execute(*["FLUSH BINARY LOGS"] * flushes)
    newest = binlog_files(server)[-1]
    deadline = time.monotonic() + 30
    while len(binlog_files(server)) > 1:  # MariaDB purges after its checkpoint
        assert time.monotonic() < deadline, "the server kept its old binlogs"
        server.execute(f"PURGE BINARY LOGS TO '{newest}'")
        time.sleep(0.2)
    return newest


def verify_differences(
    server: LocalMariaDB,
    table: TableId,
    metadata_url: str,
    sink: SinkConfig,
    lake_columns: Any = None,
) -> list[Any]:
    """The keys (a keyless table's images) verify finds different between ``table`` and
    its lake rows, in the epoch the lake's positions are in, without a repair."""
    from airflow_cdc.config import LakeColumnsConfig, VerifySettings
    from airflow_cdc.metadata import MetadataStore
    from airflow_cdc.source.catalog import load_table_schema
    from airflow_cdc.source.connection import connect
    from airflow_cdc.source.server import server_info
    from airflow_cdc.verify.run import verify_tables

    with MetadataStore.connect(metadata_url) as store:
        epoch = store.servers.current(source_config(server), may_switch=False)
    conn = connect(source_config(server))
    try:
        info, schema = server_info(conn, epoch), load_table_schema(conn, table)
    finally:
        conn.close()
    (outcome,) = verify_tables(
        source_config(server),
        info,
        sink,
        [schema],
        VerifySettings(),
        lambda: None,
        repair=False,
        lake_columns=lake_columns or LakeColumnsConfig(),
    )
    assert outcome.error is None, outcome.error
    assert outcome.check is not None
    return sorted(outcome.check.differences.keys)
