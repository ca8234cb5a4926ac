"""The sink's own commit files (``sinks.delta.own_commits``) against delta-rs's, on real
Delta tables: delta-rs reads them as the state its own commits give, its conflict rules
see their application transactions, and a version taken by another writer is a conflict."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.exceptions import CommitFailedError
from deltalake.transaction import AddAction, RemoveAction
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.config import SinkConfig
from airflow_cdc.model import Column, TableId, TableOptions, TableSchema
from airflow_cdc.sinks import DELETED_COLUMN, POSITION_COLUMN, POSITION_TYPE, DeltaSink
from airflow_cdc.sinks.cdc_columns import BUCKET_COLUMN
from airflow_cdc.sinks.delta.commits import NO_HOOKS, bucket_transactions
from airflow_cdc.sinks.delta.own_commits import commit_own, writes_own_commit
from airflow_cdc.sinks.delta.retry import is_commit_conflict
from airflow_cdc.sinks.storage import Location

PARTITIONS = [BUCKET_COLUMN]


def new_table(path: Path, **configuration: str) -> DeltaTable:
    """An empty table of an ``id`` and the bucket (so two tables name their files alike)."""
    schema = pa.schema([("id", pa.int64()), (BUCKET_COLUMN, pa.int64())])
    return DeltaTable.create(
        str(path), schema, partition_by=PARTITIONS, configuration=configuration or None
    )


def data_file(table: Path, name: str, bucket: int, ids: list[int]) -> AddAction:
    """A Parquet file written into ``table``'s bucket folder, and the action adding it."""
    relative = f"{BUCKET_COLUMN}={bucket}/{name}.parquet"
    (table / relative).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), table / relative)
    stats = {"numRecords": len(ids), "minValues": {"id": min(ids)}, "maxValues": {"id": max(ids)}}
    stats["nullCount"] = {"id": 0}
    size = (table / relative).stat().st_size
    return AddAction(relative, size, {BUCKET_COLUMN: str(bucket)}, 1_000, True, json.dumps(stats))


def commit_by_delta_rs(
    dt: DeltaTable, actions: list[AddAction | RemoveAction], app: list[Transaction]
) -> None:
    dt.create_write_transaction(
        actions,
        mode="append",
        schema=dt.schema(),
        partition_by=PARTITIONS,
        commit_properties=CommitProperties(app_transactions=app),
        post_commithook_properties=NO_HOOKS,
    )
    dt.update_incremental()


def state(dt: DeltaTable, app_ids: set[str]) -> tuple[object, ...]:
    """What a reader of the table sees: its files with their statistics, the recorded
    application versions, and the rows."""
    files = sorted(
        pa.table(dt.get_add_actions(flatten=True))
        .select(
            ["path", "size_bytes", "num_records", "min.id", "max.id", f"partition.{BUCKET_COLUMN}"]
        )
        .to_pylist(),
        key=lambda f: str(f["path"]),
    )
    versions = {app: dt.transaction_version(app) for app in sorted(app_ids)}
    rows = sorted(dt.to_pyarrow_table().column("id").to_pylist())
    return dt.version(), files, versions, rows


#: One commit: files to add (bucket, ids), live files to remove (indexes taken modulo the
#: live files), the buckets it names, and whether the writer records its own version.
COMMITS = st.lists(
    st.tuples(
        st.lists(
            st.tuples(st.integers(0, 2), st.lists(st.integers(-50, 50), min_size=1, max_size=4)),
            max_size=3,
        ),
        st.lists(st.integers(0, 20), max_size=2, unique=True),
        st.lists(st.integers(0, 2), max_size=2, unique=True),
        st.booleans(),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=12, deadline=None)
@given(commits=COMMITS, checkpoint_at=st.integers(1, 8))
def test_delta_rs_reads_an_own_commit_as_the_same_commit_of_its_own(
    tmp_path_factory: pytest.TempPathFactory, commits: list[tuple[object, ...]], checkpoint_at: int
) -> None:
    base = tmp_path_factory.mktemp("tables")
    paths = {way: base / way for way in ("delta_rs", "own")}
    tables = {way: new_table(path) for way, path in paths.items()}
    app_ids = {"writer"}
    for number, (adds, removes, buckets, record) in enumerate(commits, start=1):
        live = sorted(
            str(p) for p in pa.table(tables["own"].get_add_actions()).column("path").to_pylist()
        )
        gone = sorted({live[i % len(live)] for i in removes}) if live else []  # type: ignore[union-attr]
        app = bucket_transactions(buckets, number)  # type: ignore[arg-type]
        app += [Transaction("writer", number)] if record else []
        app_ids |= {t.app_id for t in app}
        for way, dt in tables.items():
            sizes = {
                str(f["path"]): f["size_bytes"] for f in pa.table(dt.get_add_actions()).to_pylist()
            }
            actions: list[AddAction | RemoveAction] = [
                data_file(paths[way], f"c{number}-{i}", bucket, ids)
                for i, (bucket, ids) in enumerate(adds)  # type: ignore[attr-defined]
            ]
            actions += [
                RemoveAction(
                    path,
                    True,
                    2_000,
                    sizes[path],
                    {BUCKET_COLUMN: path.split("/")[0].split("=")[1]},
                )
                for path in gone
            ]
            if way == "own":
                commit_own(
                    dt,
                    Location(str(paths[way])),
                    actions,
                    CommitProperties(app_transactions=app),
                    PARTITIONS,
                )
            else:
                commit_by_delta_rs(dt, actions, app)
        if number == checkpoint_at:
            for dt in tables.values():
                dt.create_checkpoint()
        held = state(tables["delta_rs"], app_ids)
        assert state(tables["own"], app_ids) == held  # the writer's own table, brought up to date
        assert state(DeltaTable(str(paths["own"])), app_ids) == held  # a reader opening it


def test_a_version_another_writer_took_is_a_conflict_and_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "t"
    first, late = new_table(path), DeltaTable(str(path))
    location = Location(str(path))
    commit_own(first, location, [data_file(path, "a", 0, [1])], CommitProperties(), PARTITIONS)
    with pytest.raises(CommitFailedError) as raised:
        commit_own(
            late,
            location,
            [data_file(path, "b", 1, [101])],
            CommitProperties(app_transactions=[Transaction("writer", 7)]),
            PARTITIONS,
        )
    assert is_commit_conflict(raised.value)  # the sink's retry opens the table again
    reader = DeltaTable(str(path))
    assert reader.version() == 1
    assert reader.transaction_version("writer") is None
    assert sorted(os.listdir(path / "_delta_log")) == [f"{v:020d}.json" for v in (0, 1)]


@pytest.mark.parametrize(("bucket", "conflicts"), [(1, True), (2, False)])
def test_delta_rs_conflicts_with_an_own_commit_into_the_same_bucket(
    tmp_path: Path, bucket: int, conflicts: bool
) -> None:
    path = tmp_path / "t"
    own, other = new_table(path), DeltaTable(str(path))
    commit_own(
        own,
        Location(str(path)),
        [],
        CommitProperties(app_transactions=bucket_transactions([1], 0)),
        PARTITIONS,
    )
    commit = lambda: commit_by_delta_rs(other, [], bucket_transactions([bucket], 0))  # noqa: E731
    if conflicts:
        with pytest.raises(CommitFailedError):
            commit()
    else:
        commit()
        assert other.version() == 2


def test_only_a_plain_local_table_gets_an_own_commit(tmp_path: Path) -> None:
    plain = new_table(tmp_path / "plain")
    assert writes_own_commit(plain, Location(str(tmp_path / "plain")))
    assert not writes_own_commit(plain, Location("s3://bucket/plain"))
    append_only = new_table(tmp_path / "append_only", **{"delta.appendOnly": "true"})
    assert not writes_own_commit(append_only, Location(str(tmp_path / "append_only")))
    vectors = new_table(tmp_path / "vectors", **{"delta.enableDeletionVectors": "true"})
    assert not writes_own_commit(vectors, Location(str(tmp_path / "vectors")))


def test_the_stream_s_small_merges_commit_their_own(tmp_path: Path) -> None:
    """The wiring: a small merge of the streaming sink (``rewrite.commit_rewrite``) writes
    its commit itself, and readers see its rows."""
    table = TableId("db", "t")
    schema = TableSchema(table, (Column("id", "bigint", "bigint(20)", False),), ("id",))
    sink = DeltaSink.streaming(SinkConfig(str(tmp_path / "lake")))
    sink.ensure_table(
        schema,
        pa.schema([pa.field("id", pa.int64(), nullable=False)]),
        TableOptions(bucket_width=100),
    )

    def rows(keys: list[int], position: int) -> pa.Table:
        return pa.table(
            {
                "id": pa.array(keys, pa.int64()),
                POSITION_COLUMN: pa.array([position] * len(keys), POSITION_TYPE),
                DELETED_COLUMN: pa.array([False] * len(keys), pa.bool_()),
            }
        )

    sink.apply(table, rows([1, 2, 150], 10), app_id="stream", app_version=1)
    sink.apply(table, rows([2, 3], 20), app_id="stream", app_version=2)
    reader = DeltaTable(sink.table_uri(table))
    last = (
        Path(sink.table_uri(table).removeprefix("file://"))
        / "_delta_log"
        / f"{reader.version():020d}.json"
    )
    info = json.loads(last.read_text().splitlines()[0])["commitInfo"]
    assert info["clientVersion"].startswith("airflow-cdc-")
    assert reader.transaction_version("stream") == 2
    assert sorted(sink.read_live(table).column("id").to_pylist()) == [1, 2, 3, 150]
