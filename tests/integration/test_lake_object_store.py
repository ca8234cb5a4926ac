"""The lake on a real S3 server (SeaweedFS, started by the test session): the write check's
answers to wrong input, concurrent writers committing to one table through the store's
conditional writes, and a chunk job whose staging and data files go through the store
(nothing on a local disk named after the sink URI)."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing as mp
import os
import random
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from deltalake import DeltaTable

from airflow_cdc.errors import ConfigurationError
from airflow_cdc.model import ChunkRange, Column, TableId, TableOptions, TableSchema
from airflow_cdc.sinks import DELETED_COLUMN, POSITION_COLUMN, POSITION_TYPE, DeltaSink
from airflow_cdc.sinks.storage.connection import storage_options_from_connection
from airflow_cdc.sinks.storage.staging import staging_folder, write_arrow_file
from airflow_cdc.sinks.storage.storage import Location
from devtools.local_mariadb import LocalMariaDB
from devtools.local_seaweedfs import LocalSeaweedFS
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import job_spec, plan

pytestmark = pytest.mark.integration


def lake_options(s3: LocalSeaweedFS) -> dict[str, str]:
    """What the ``cdc_lake`` connection of this server gives."""
    conn = s3.airflow_connection()
    return storage_options_from_connection(
        "cdc_lake", conn["conn_type"], conn["login"], conn["password"], conn["extra"]
    )


def lake_objects(s3: LocalSeaweedFS, prefix: str) -> list[str]:
    filesystem, path = Location(f"s3://{prefix}", lake_options(s3)).resolve()
    selector = pafs.FileSelector(path, recursive=True, allow_not_found=True)
    return [info.path for info in filesystem.get_file_info(selector)]


# -- bad input: refused by the plan task before the source or any Spark job is touched --------


def _plan(sink_path: str) -> None:
    from airflow_cdc.operators.plan import PlanSnapshotOperator

    op = PlanSnapshotOperator(
        task_id="plan", tables=["shop.orders"], sink_path=sink_path, chunking={"chunk_rows": 100}
    )
    op.execute({"run_id": "r", "ti": None})


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("no connection", "the Airflow connection 'cdc_lake' is not defined"),
        ("no credentials", "access denied without credentials: set the login (access key)"),
        ("wrong secret", "the store refused the secret key: fix the password of connection"),
        ("unknown key", "the store does not know the access key: fix the login of connection"),
        ("read-only key", "access denied: let the access key of connection 'cdc_lake' read,"),
        ("closed endpoint", "cannot reach the store at http://127.0.0.1:"),
        ("missing bucket", "the bucket 'no-such-bucket' does not exist at http://127.0.0.1:"),
    ],
)
def test_a_lake_that_cannot_be_written_is_refused_with_the_fix(
    seaweedfs: LocalSeaweedFS,
    untouched: Path,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    expected: str,
) -> None:
    conn = seaweedfs.airflow_connection()
    sink_path = "s3://lake/refused"
    if case == "no credentials":
        conn["login"] = conn["password"] = None
    elif case == "wrong secret":
        conn["password"] = "not-the-secret"
    elif case == "unknown key":
        conn["login"] = "AKIAUNKNOWN"
    elif case == "read-only key":
        conn["login"], conn["password"] = seaweedfs.read_only_keys
    elif case == "closed endpoint":
        from devtools.local_mariadb import free_port

        conn["extra"] = {**conn["extra"], "endpoint_url": f"http://127.0.0.1:{free_port()}"}
    elif case == "missing bucket":
        sink_path = "s3://no-such-bucket/lake"
    if case != "no connection":
        monkeypatch.setenv("AIRFLOW_CONN_CDC_LAKE", json.dumps(conn))
    with pytest.raises(ConfigurationError) as raised:
        _plan(sink_path)
    message = str(raised.value)
    assert expected in message, message
    assert "cdc_lake" in message  # the connection to fix
    assert seaweedfs.secret_key not in message
    assert not untouched.exists()  # the metadata DB was not even created
    assert lake_objects(seaweedfs, "lake/refused") == []  # no probe object left


def test_a_writable_lake_passes_and_keeps_nothing(
    seaweedfs: LocalSeaweedFS, untouched: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_cdc.operators._params import lake_sink

    monkeypatch.setenv("AIRFLOW_CONN_CDC_LAKE", json.dumps(seaweedfs.airflow_connection()))
    sink = lake_sink("s3://lake/checked", lake_conn_id="cdc_lake", check=True)
    assert sink.storage_options == lake_options(seaweedfs)
    assert lake_objects(seaweedfs, "lake/checked") == []


# -- concurrent writers on the store -------------------------------------------------------------

TABLE = TableId("shop", "orders")
SCHEMA = TableSchema(
    TABLE,
    (Column("id", "bigint", "bigint(20)", False), Column("v", "varchar", "text", True)),
    ("id",),
)
ARROW = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
KEYS, WIDTH, CHUNKS = 800, 100, 4
Write = tuple[int, int, bool]  # key, position, deleted


def _rows(writes: list[Write]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([w[0] for w in writes], pa.int64()),
            "v": [None if w[2] else f"{w[0]}@{w[1]}" for w in writes],
            POSITION_COLUMN: pa.array([w[1] for w in writes], POSITION_TYPE),
            DELETED_COLUMN: [w[2] for w in writes],
        }
    )


def _chunk_writer(root: str, options: dict[str, str], chunk: int, go: Event, out: Any) -> None:
    """A chunk job's write: its range's data files, one commit, a merge if the range is
    taken by then (the stream got there first)."""
    sink = DeltaSink(root, storage_options=options)
    per = KEYS // CHUNKS
    rng = ChunkRange((chunk * per,), ((chunk + 1) * per,))
    rows = _rows([(k, 1000 + chunk, False) for k in range(chunk * per, (chunk + 1) * per)])
    out.put(("ready", None))
    go.wait(60)
    try:
        writer = sink.range_writer(TABLE)
        files = writer.write(rows)
        how = "files"
        if not sink.commit_new_range(TABLE, files, rng, writer):
            sink.remove_files(TABLE, files)
            sink.apply(TABLE, rows, keys_unique=True)
            how = "merge"
        out.put(("ok", how))
    except Exception as exc:  # reported to the test, which fails with it
        out.put(("error", repr(exc)))


def _stream_writer(
    root: str, options: dict[str, str], batches: list[list[Write]], app: str, go: Event, out: Any
) -> None:
    """A stream's batches, each recording its application transaction."""
    sink = DeltaSink(root, storage_options=options)
    out.put(("ready", None))
    go.wait(60)
    try:
        attempts = [
            sink.apply(TABLE, _rows(batch), app_id=app, app_version=number).attempts
            for number, batch in enumerate(batches, start=1)
        ]
        out.put(("ok", attempts))
    except Exception as exc:
        out.put(("error", repr(exc)))


def test_concurrent_chunk_commits_and_stream_merges_on_the_store_lose_nothing(
    seaweedfs: LocalSeaweedFS,
) -> None:
    """Four chunk writers and two streams commit to one table at once (processes, as Spark
    jobs are): every write is in the table with last-writer-wins, every commit is one
    log version, and each stream's last batch is recorded."""
    options = lake_options(seaweedfs)
    root = "s3://lake/concurrency"
    DeltaSink(root, storage_options=options).ensure_table(
        SCHEMA, ARROW, TableOptions(bucket_width=WIDTH)
    )
    rng = random.Random(18)
    streams: dict[str, list[list[Write]]] = {}
    for app, parity in (("stream-a", 0), ("stream-b", 1)):
        streams[app] = [
            [
                (key, 2000 + 2 * (10 * n + i) + parity, rng.random() < 0.2)
                for i, key in enumerate(rng.sample(range(KEYS), 30))
            ]
            for n in range(6)
        ]
    expected: dict[int, Write] = {k: (k, 1000 + k // (KEYS // CHUNKS), False) for k in range(KEYS)}
    for batches in streams.values():
        for write in (w for batch in batches for w in batch):
            if write[1] > expected[write[0]][1]:
                expected[write[0]] = write

    ctx = mp.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_chunk_writer, args=(root, options, chunk, go, out))
        for chunk in range(CHUNKS)
    ] + [
        ctx.Process(target=_stream_writer, args=(root, options, batches, app, go, out))
        for app, batches in streams.items()
    ]
    try:
        for proc in procs:
            proc.start()
        assert [out.get(timeout=120)[0] for _ in procs] == ["ready"] * len(procs)
        go.set()
        results = [out.get(timeout=600) for _ in procs]
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
    assert all(kind == "ok" for kind, _ in results), results

    sink = DeltaSink(root, storage_options=options)
    rows = sink.read_all(TABLE).to_pylist()
    held = {r["id"]: (r["id"], int(r[POSITION_COLUMN]), bool(r[DELETED_COLUMN])) for r in rows}
    assert len(held) == len(rows), "one row per key"
    assert held == expected
    assert all(
        r["v"] == (None if r[DELETED_COLUMN] else f"{r['id']}@{r[POSITION_COLUMN]}") for r in rows
    )
    assert sink.applied_version(TABLE, "stream-a") == 6
    assert sink.applied_version(TABLE, "stream-b") == 6
    table = DeltaTable(sink.table_uri(TABLE), storage_options=options)
    versions = [entry["version"] for entry in table.history()]
    # Every write is one commit (none lost, none doubled): version 0 creates the table,
    # then 4 chunks and 12 batches.
    assert sorted(versions) == list(range(table.version() + 1))
    assert table.version() == CHUNKS + sum(len(b) for b in streams.values())


# -- a chunk job through the store ---------------------------------------------------------------


@pytest.mark.parametrize("staging", ["default", "staging_path"])
def test_a_chunk_job_stages_and_writes_through_the_store(
    seaweedfs: LocalSeaweedFS,
    mariadb: LocalMariaDB,
    fresh_db: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    staging: str,
) -> None:
    """Partitions staged, data files written and committed, all on S3; a killed earlier
    attempt's staged objects removed by the next; nothing left on a local disk (the old
    bug: a folder named ``s3:`` in the working directory). The staging area is the sink's
    own, or one ``staging_path`` puts elsewhere."""
    from airflow_cdc.snapshot.unit import run_chunk

    monkeypatch.chdir(tmp_path)
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, v VARCHAR(20))",
        f"INSERT INTO `{fresh_db}`.t SELECT seq, CONCAT('v', seq) FROM `{fresh_db}`.seq_1_to_30000",
    )
    meta = f"sqlite:///{tmp_path / 'meta.db'}"
    (chunk,) = plan(mariadb, [f"{fresh_db}.t"], chunk_rows=100_000, metadata_url=meta).chunks
    root = f"s3://lake/{fresh_db}-{staging}"  # the parameters share a database name
    spec = job_spec(
        mariadb,
        chunk.chunk_id,
        meta,
        root,
        partition_rows=10_000,
        storage_options=lake_options(seaweedfs),
    )
    if staging == "staging_path":
        spec = dataclasses.replace(
            spec,
            sink=dataclasses.replace(spec.sink, staging_path=f"{root}-stage"),
        )
    sink = spec.sink
    outcome = run_chunk(spec, parallelism=2)
    assert outcome.as_files
    assert outcome.partitions >= 3  # several staged partitions
    # A killed attempt's leftovers; the re-run (attempt 2) removes them and merges.
    left = staging_folder(sink, f"chunk-{chunk.chunk_id}-1-deadbeef").child("part-00000.arrow")
    write_arrow_file(left, pa.table({"x": [1]}))
    mariadb.execute(f"UPDATE `{fresh_db}`.t SET v = 'changed' WHERE id <= 10")
    again = run_chunk(spec, parallelism=2)
    assert again.attempt == 2
    assert not again.as_files  # the range is held: merged

    assert_replica_equals_source(
        mariadb, root, TableId(fresh_db, "t"), ["id"], storage_options=sink.storage_options
    )
    assert lake_objects(seaweedfs, f"{root.removeprefix('s3://')}/_cdc_staging") == []
    assert lake_objects(seaweedfs, f"{root.removeprefix('s3://')}-stage") == []
    # No "s3:" folder here, nor anything else but the metadata DB (and its journal).
    assert [name for name in os.listdir(tmp_path) if not name.startswith("meta.db")] == []
