"""Verify of tables without a key (issue 47) on the real MariaDB and a Delta table made by
the real snapshot and stream: two tables whose rows exist up to three times over, one
chunked by ``c``, one read whole; every column type the canonical forms treat apart
(DECIMAL, VARCHAR with trailing spaces, DATETIME(6), DOUBLE, BLOB, NULLs), and rows equal
but for case (one row to the server's collation, two images).

1. Snapshotted under no writer, then changed (an exact duplicate inserted, one of two
   equal rows deleted, one of three updated) and streamed: both verify clean.
2. Changed again while the check's views are open (the stream applies it before the lake
   is read): the images newer than the cut are left out of the lake's sums and their rows
   taken out of the source's, and the tables still verify clean.
3. The lake tampered with: a duplicate's count changed, an image dropped, an image the
   source lacks added, and both images equal but for case changed. Verify names each
   image with both counts (the source's listed grouped by the server, under
   ONLY_FULL_GROUP_BY).
4. The repair's ranges re-snapshot them through the chunk path: clean again, and the lake's
   multiset is the source's.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_cdc.config import ChunkingConfig, SinkConfig, VerifySettings
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import BinlogPosition, ChunkRange, TableId, TableSchema
from airflow_cdc.planning.plan_snapshot import chunked_schemas, plan_snapshot
from airflow_cdc.sinks.contract.cdc_columns import COUNT_COLUMN, POSITION_COLUMN, ROW_HASH_COLUMN
from airflow_cdc.sinks.delta import DeltaSink
from airflow_cdc.source.catalog import load_table_schemas
from airflow_cdc.source.connection import connect
from airflow_cdc.source.server import ServerInfo, server_info
from airflow_cdc.verify.check import TableCheck, check_table
from airflow_cdc.verify.repair import repair_plan, repair_ranges
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import lake_multiset, source_multiset
from tests.support.pipeline import snapshot_all, source_config, stream_spec
from tests.support.stream_harness import InProcessStream

pytestmark = pytest.mark.integration

#: 120 images, image ``s`` held by ``1 + s % 3`` rows.
COLUMNS = "c INT NOT NULL, v VARCHAR(12), amount DECIMAL(10,2), at DATETIME(6), d DOUBLE, b BLOB"
ROWS = (
    "SELECT a.seq % 40, IF(a.seq % 5 = 0, NULL, CONCAT('v', a.seq % 3, IF(a.seq % 7 = 0, ' ', ''))),"
    " a.seq / 100, '2024-01-01' + INTERVAL a.seq SECOND + INTERVAL 250 MICROSECOND,"
    " IF(a.seq % 9 = 0, NULL, a.seq / 3), IF(a.seq % 11 = 0, NULL, UNHEX(HEX(a.seq % 4)))"
    " FROM seq_1_to_120 a JOIN seq_1_to_3 r ON r.seq <= 1 + a.seq % 3"
)
#: Rows equal but for case ('case' once, 'CASE' twice): one row to a case-insensitive
#: collation, two images.
CASES = "(7, 'case', 9.99), (7, 'CASE', 9.99), (7, 'CASE', 9.99)"
#: Changes a multiset makes hard (``{t}``: the table; in round ``r`` the images ``s`` of
#: amount ``s / 100`` from ``30 r``): a duplicate of a row held twice, one of two equal
#: rows deleted, one of three equal rows updated; one more 'CASE' (its rows, not
#: 'case''s, are taken out of the source's sums when the stream applied it after the cut).
CHANGES = (
    "INSERT INTO {t} SELECT * FROM {t} WHERE amount = {s:.2f} + 0.01 LIMIT 1",
    "DELETE FROM {t} WHERE amount = {s:.2f} + 0.04 LIMIT 1",
    "UPDATE {t} SET v = 'moved' WHERE amount = {s:.2f} + 0.05 LIMIT 1",
    "INSERT INTO {t} (c, v, amount) VALUES (7, 'CASE', 9.99)",  # beside 'case'
)


@pytest.fixture
def tables(mariadb: LocalMariaDB, fresh_db: str) -> list[TableId]:
    mariadb.execute(
        f"CREATE TABLE log ({COLUMNS}, KEY (c))",
        f"CREATE TABLE heap ({COLUMNS})",
        f"INSERT INTO log {ROWS}",
        f"INSERT INTO heap {ROWS}",
        *(f"INSERT INTO {t} (c, v, amount) VALUES {CASES}" for t in ("log", "heap")),
        database=fresh_db,
    )
    return [TableId(fresh_db, "log"), TableId(fresh_db, "heap")]


def change(mariadb: LocalMariaDB, table: TableId, r: int) -> None:
    mariadb.execute(*(sql.format(t=table.quoted(), s=0.3 * r) for sql in CHANGES))


class Verify:
    """``check_table`` as the verify task calls it: the catalog's schemas with their
    chunking columns, the stream's committed position to wait for."""

    def __init__(self, mariadb: LocalMariaDB, lake: Path, stream: InProcessStream) -> None:
        self.source, self.lake, self.stream = source_config(mariadb), lake, stream
        conn = connect(self.source)
        try:  # in the epoch the stream's positions are in
            epoch = stream.store.servers.current(self.source, may_switch=False)
            self.info: ServerInfo = server_info(conn, epoch)
        finally:
            conn.close()
        #: Called once when the check's views are open (before the lake is read).
        self.while_open: list[Any] = []

    def schema(self, table: TableId) -> TableSchema:
        conn = connect(self.source)
        try:
            (schema,) = chunked_schemas(conn, load_table_schemas(conn, [table]))
        finally:
            conn.close()
        return schema

    def __call__(self, table: TableId, **settings: Any) -> TableCheck:
        def committed() -> BinlogPosition | None:
            for step in self.while_open:
                step()
            self.while_open.clear()
            state = self.stream.store.streams.state(self.stream.spec.stream_id)
            return None if state is None else state.committed_position

        wanted = VerifySettings(**{"range_rows": 60, "stream_wait_seconds": 30, **settings})
        sink = SinkConfig(str(self.lake))
        return check_table(self.source, self.info, sink, self.schema(table), wanted, committed)


@pytest.fixture
def streamed(
    mariadb: LocalMariaDB, tables: list[TableId], tmp_path: Path
) -> Iterator[tuple[Verify, str]]:
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    conn = connect(source_config(mariadb))
    try:
        with MetadataStore.connect(meta) as store:
            chunking = ChunkingConfig(chunk_rows=80)
            record = plan_snapshot(conn, store, tables, chunking, "keyless").record
    finally:
        conn.close()
    snapshot_all(mariadb, record, meta, lake)
    spec = stream_spec(mariadb, [str(t) for t in tables], meta, lake, tmp_path / "c")
    stream = InProcessStream(spec, tmp_path)
    try:
        yield Verify(mariadb, lake, stream), meta
    finally:
        stream.close()


def tamper(lake: Path, table: TableId) -> dict[str, Any]:
    """A duplicate's count lowered (3 rows: ``amount`` 0.02), an image dropped (0.07), an
    image the source lacks added (0.10 with ``v`` 'extra'); of the images equal but for
    case, 'CASE' (4 rows) lowered to 1, 'case' dropped. The lake's images by amount."""
    uri = DeltaSink(str(lake)).table_uri(table)
    rows = DeltaTable(uri).to_pyarrow_table()
    by_amount = {str(r["amount"]): r for r in rows.to_pylist()}
    assert by_amount["0.02"][COUNT_COLUMN] == 3
    assert by_amount["0.07"][COUNT_COLUMN] == 2
    DeltaTable(uri).update(
        predicate="amount = CAST(0.02 AS DECIMAL(10, 2))", updates={COUNT_COLUMN: "2"}
    )
    DeltaTable(uri).delete("amount = CAST(0.07 AS DECIMAL(10, 2))")
    DeltaTable(uri).update(predicate="v = 'CASE'", updates={COUNT_COLUMN: "1"})
    DeltaTable(uri).delete("v = 'case'")
    extra = rows.filter(pc.equal(rows.column("amount"), pa.scalar(by_amount["0.10"]["amount"])))
    extra = extra.set_column(extra.schema.get_field_index("v"), "v", pa.array(["extra"]))
    hashes = pa.array([os.urandom(16)], extra.schema.field(ROW_HASH_COLUMN).type)
    extra = extra.set_column(extra.schema.get_field_index(ROW_HASH_COLUMN), ROW_HASH_COLUMN, hashes)
    write_deltalake(uri, extra, mode="append")
    return by_amount


def test_keyless_tables_verify_clean_and_tampering_is_named_with_both_counts(
    mariadb: LocalMariaDB, tables: list[TableId], streamed: tuple[Verify, str]
) -> None:
    verify, meta = streamed
    log, heap = tables
    for table in tables:
        change(mariadb, table, 1)
    verify.stream.run_until_caught_up()
    for table in tables:
        found = verify(table)
        assert found.clean, found.differences.describe()
        assert found.passes == 1
        assert found.rows == sum(source_multiset(mariadb, table).values())
    assert verify.schema(log).key == ("c",)
    assert verify.schema(heap).key == ()

    # 2. changes the stream applies after the views are open: newer than the cut
    for table in tables:
        verify.while_open[:] = [
            lambda t=table: change(mariadb, t, 2),
            verify.stream.run_until_caught_up,
        ]
        found = verify(table)
        assert found.clean, found.differences.describe()
        assert found.passes == 1  # equal at once, not found equal by listing rows later
        written = DeltaSink(str(verify.lake)).read_all(table).column(POSITION_COLUMN)
        assert pc.max(written).as_py() > found.cut.encode()  # the lake had newer images

    # 3. tampered
    for table in tables:
        held = tamper(verify.lake, table)
        # the images listed grouped by the server, under the strictest GROUP BY mode
        mode = mariadb.query("SELECT @@GLOBAL.sql_mode")[0][0]
        mariadb.execute("SET GLOBAL sql_mode = CONCAT(@@GLOBAL.sql_mode, ',ONLY_FULL_GROUP_BY')")
        try:
            found = verify(table, list_rows=3)
        finally:
            mariadb.execute(f"SET GLOBAL sql_mode = '{mode}'")
        differences = found.differences
        # narrowed below the first level, listed once no deeper level narrowed the rows
        assert 2 < found.passes < 6
        named = [(image[1], str(image[2])) for image in differences.keys]  # v, amount
        counts = dict(zip(named, differences.counts, strict=True))
        assert counts == {
            ("v2", "0.02"): (3, 2),  # a duplicate's count lowered
            ("v1 ", "0.07"): (2, 0),  # an image dropped
            ("extra", "0.10"): (0, held["0.10"][COUNT_COLUMN]),  # an image added
            ("CASE", "9.99"): (4, 1),  # images the server's collation takes for one
            ("case", "9.99"): (1, 0),
        }, differences.describe()
        assert {(i[1], str(i[2])) for i in differences.missing} == {
            ("v1 ", "0.07"),
            ("case", "9.99"),
        }
        assert [(i[1], str(i[2])) for i in differences.extra] == [("extra", "0.10")]
        text = differences.describe()
        assert "2 missing in the lake (" in text
        assert "2 in the source, 0 in the lake" in text
        assert "2 with other counts (" in text
        assert "3 in the source, 2 in the lake" in text

        # 4. repaired through the chunk path
        conn = connect(verify.source)
        try:
            ranges = repair_ranges(conn, verify.schema(table), differences)
        finally:
            conn.close()
        if table == heap:  # read whole: the whole table
            assert ranges == [ChunkRange(None, None)]
        else:  # between the source's values of c around each image's
            assert 1 <= len(ranges) <= 3
            assert not any(r.unbounded for r in ranges)
        with MetadataStore.connect(meta) as store:
            record = store.plans.create(
                label="repair", plans=repair_plan(verify.schema(table), ranges)
            )
        snapshot_all(mariadb, record, meta, verify.lake)
        assert verify(table).clean
        assert lake_multiset(str(verify.lake), table) == source_multiset(mariadb, table)
