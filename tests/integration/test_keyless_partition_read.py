"""``source.view_read.read_in_view`` on the real MariaDB, by both engines: a partition of a
table without a key read in a view of its own, with that view's exact binlog position.

The oracle is the table itself (``SELECT c, v, COUNT(*) ... GROUP BY``) and the binlog: the
rows each partition read, with the binlog's changes of its range after the position it
returned (``snapshot.count_correction``, the pure rule, by hand), are the table at the
end. A position a moment off (before the view, or the server's when the read ends) breaks
that, and the tests below that pin it: an empty partition's position is the binlog's end
on a quiet server, and a write committed while a view is open moves the server's position
but neither the view's nor its rows.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Set
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from airflow_cdc.config import SourceConfig
from airflow_cdc.model import (
    BinlogPosition,
    ChangeEvent,
    ChunkRange,
    ServerEpoch,
    TableId,
    TableSchema,
)
from airflow_cdc.model.row_images import halves
from airflow_cdc.sinks.storage.staging import read_arrow_file
from airflow_cdc.sinks.storage.storage import Location
from airflow_cdc.snapshot.count_correction import counts_at_high_watermark
from airflow_cdc.snapshot.reader import PartitionRead, read_partition
from airflow_cdc.source.arrow_types import arrow_schema
from airflow_cdc.source.binlog.reader import read_changes
from airflow_cdc.source.connection import connect
from airflow_cdc.source.server import ServerInfo, server_info
from airflow_cdc.source.view_read import ViewRead, read_in_view
from devtools.local_mariadb import LocalMariaDB
from tests.support.keyless_writes import busy_writers
from tests.support.pipeline import server_position, source_config, table_schemas
from tests.support.type_matrix import create_types_table, create_zero_dates_table

pytestmark = pytest.mark.integration

COLUMNS = ("c", "v")
#: Two partitions of the chunking column ``c`` (0..5).
PARTITIONS = (ChunkRange(None, (3,)), ChunkRange((3,), None))


@pytest.fixture(params=["connectorx", "pymysql"])
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def keyless_table(mariadb: LocalMariaDB, db: str) -> tuple[TableSchema, TableSchema]:
    """``db.log (c, v)`` without a key, 60 rows (10 of each); the schema a read takes
    (``c`` its chunking column) and the binlog reader's (every column as the key, so it
    decodes whole before-images: the catalog's schema of a twin with a unique index)."""
    initial = ", ".join(f"({n % 6}, '{'ab'[n % 2]}')" for n in range(60))
    mariadb.execute(
        f"CREATE TABLE `{db}`.log (c INT NOT NULL, v VARCHAR(4) NOT NULL, KEY (c))",
        f"CREATE TABLE `{db}`.log_shape (c INT NOT NULL, v VARCHAR(4) NOT NULL, UNIQUE (c, v))",
        f"INSERT INTO `{db}`.log VALUES {initial}",
    )
    table, shape = TableId(db, "log"), TableId(db, "log_shape")
    whole = dataclasses.replace(table_schemas(mariadb, shape)[shape], table=table)
    return dataclasses.replace(whole, key=("c",)), whole


def epoch_zero(mariadb: LocalMariaDB) -> ServerInfo:
    """The server in epoch 0 (the epoch of ``server_position``'s positions)."""
    conn = connect(source_config(mariadb))
    try:
        found = server_info(conn)
    finally:
        conn.close()
    return found.in_epoch(ServerEpoch(found.server_id, 0))


def counted(read: ViewRead) -> Counter[tuple[object, ...]]:
    return Counter(tuple(row.values()) for row in read.rows.to_pylist())


def test_partitions_read_in_their_own_views_under_writers_are_exact(
    mariadb: LocalMariaDB, fresh_db: str, engine: str
) -> None:
    """Two partitions read at once, each in its view (held open 0.5 s before its rows are
    read, while three writers insert, delete and update), each corrected with the binlog's
    halves of its range after its own position: together the table at the end."""
    db, cfg, info = fresh_db, source_config(mariadb), epoch_zero(mariadb)
    schema, whole = keyless_table(mariadb, db)
    start = server_position(cfg)
    with busy_writers(mariadb, db), ThreadPoolExecutor(2) as pool:
        moved_past(cfg, start)
        futures, sessions = [], set[int]()
        for rng in PARTITIONS:
            futures.append(
                pool.submit(
                    read_in_view, cfg, info, schema, rng, engine=engine, in_view=["DO SLEEP(0.5)"]
                )
            )
            sessions.add(wait_for_sleeping_view(mariadb, other_than=sessions))
            moved_past(cfg, server_position(cfg))  # writes while the view is open
        reads = [future.result() for future in futures]
        moved_past(cfg, server_position(cfg))
    end = server_position(cfg)
    final = Counter(
        {
            (c, v): n
            for c, v, n in mariadb.query(f"SELECT c, v, COUNT(*) FROM `{db}`.log GROUP BY c, v")
        }
    )
    events = [item for item in read_changes(cfg, {schema.table: whole}, start, end)
              if isinstance(item, ChangeEvent)]  # fmt: skip
    window = [half for event in events for half in halves(event, COLUMNS)]
    assert len(events) > 50  # the writers were busy around both views
    assert all(start < read.position <= end for read in reads)
    assert reads[0].position != reads[1].position
    assert all(read.rows.schema == arrow_schema(schema) for read in reads)

    corrected: Counter[tuple[object, ...]] = Counter()
    for rng, read in zip(PARTITIONS, reads, strict=True):
        at_end = counts_at_high_watermark(
            counted(read), window, read.position, end, lambda image, r=rng: r.contains(image[:1])
        )
        corrected.update({image: n for image, n in at_end.items() if n})
    assert corrected == final


def test_an_empty_partition_and_an_empty_table_read_whole_get_their_views_position(
    mariadb: LocalMariaDB, fresh_db: str, engine: str
) -> None:
    """On a quiet server a view's position is the binlog's end: an empty range, and an
    empty table read whole (no chunking column), return it with no row."""
    db, cfg, info = fresh_db, source_config(mariadb), epoch_zero(mariadb)
    schema, _ = keyless_table(mariadb, db)
    mariadb.execute(f"CREATE TABLE `{db}`.nothing (c INT NOT NULL, v VARCHAR(4) NOT NULL)")
    whole_empty = dataclasses.replace(schema, table=TableId(db, "nothing"), key=(), keyless=True)
    quiet = server_position(cfg)

    beyond = read_in_view(cfg, info, schema, ChunkRange((100,), None), engine=engine)
    nothing = read_in_view(cfg, info, whole_empty, ChunkRange(None, None), engine=engine)

    assert server_position(cfg) == quiet
    for read, read_schema in ((beyond, schema), (nothing, whole_empty)):
        assert read.rows.num_rows == 0
        assert read.rows.schema == arrow_schema(read_schema)
        assert read.position == quiet


def test_the_position_is_the_views_not_the_servers_when_the_rows_are_read(
    mariadb: LocalMariaDB, fresh_db: str, engine: str
) -> None:
    """A row committed while the view is open (it waits in ``DO SLEEP``) moves the server's
    position, but the read returns neither the row nor that position; also where the
    server's default isolation is READ COMMITTED (each statement its own view)."""
    db, cfg, info = fresh_db, source_config(mariadb), epoch_zero(mariadb)
    schema, _ = keyless_table(mariadb, db)
    before = server_position(cfg)
    result: list[ViewRead] = []
    reader = threading.Thread(
        target=lambda: result.append(
            read_in_view(cfg, info, schema, PARTITIONS[0], engine=engine, in_view=["DO SLEEP(1)"])
        )
    )
    (isolation,) = mariadb.query("SELECT @@GLOBAL.tx_isolation")[0]
    mariadb.execute("SET GLOBAL tx_isolation = 'READ-COMMITTED'")
    try:
        reader.start()
        try:
            wait_for_sleeping_view(mariadb)
            mariadb.execute(f"INSERT INTO `{db}`.log VALUES (1, 'b')")
        finally:
            reader.join()
    finally:
        mariadb.execute(f"SET GLOBAL tx_isolation = '{isolation}'")
    after = server_position(cfg)
    (read,) = result
    assert after > before
    assert read.position == before
    assert counted(read)[(1, "b")] == 10  # the 60 rows hold (1, 'b') 10 times; not 11


def wait_for_sleeping_view(
    mariadb: LocalMariaDB, other_than: Set[int] = frozenset(), seconds: float = 10.0
) -> int:
    """The id of a session running ``DO SLEEP`` (its view is open: the pause runs after
    the view's statements), not one of ``other_than``; waits for one."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = mariadb.query(
            "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE 'DO SLEEP%'"
        )
        fresh = {int(row[0]) for row in found} - other_than
        if fresh:
            return min(fresh)
        time.sleep(0.02)
    raise AssertionError("no read view was opened")


def moved_past(cfg: SourceConfig, position: BinlogPosition, seconds: float = 10.0) -> None:
    """Until the binlog holds a transaction after ``position`` (the writers wrote)."""
    deadline = time.monotonic() + seconds
    while server_position(cfg) <= position:
        if time.monotonic() > deadline:
            raise AssertionError(f"nothing was written after {position} in {seconds} s")
        time.sleep(0.02)


def test_every_type_reads_as_the_partition_reader_gives_it(
    mariadb: LocalMariaDB, fresh_db: str, engine: str, tmp_path: Path
) -> None:
    """The position's columns and marker row change no value: the type matrix read in a
    view equals what ``snapshot.reader.read_partition`` stages, by the same engine; zero
    dates send connectorx to the second SELECT, which carries a position too."""
    db, cfg, info = fresh_db, source_config(mariadb), epoch_zero(mariadb)
    create_zero_dates_table(mariadb, db)
    types, zeros = create_types_table(mariadb, db), TableId(db, "z")
    for table, schema in table_schemas(mariadb, types, zeros).items():
        out = Location(str(tmp_path / f"{table.table}.arrow"))
        read_partition(PartitionRead(cfg, schema, ChunkRange(None, None), out, engine))
        quiet = server_position(cfg)
        read = read_in_view(cfg, info, schema, ChunkRange(None, None), engine=engine)
        assert read.rows.equals(read_arrow_file(out)), table
        assert read.position == quiet


def test_every_type_read_empty_goes_through_the_marker_row(
    mariadb: LocalMariaDB, fresh_db: str, engine: str
) -> None:
    """An empty table of every type (the matrix's, emptied): by connectorx the second read,
    with the marker row, whose NULLs keep each column's type; no row and the position."""
    db, cfg, info = fresh_db, source_config(mariadb), epoch_zero(mariadb)
    types = create_types_table(mariadb, db)
    mariadb.execute(f"DELETE FROM {types.quoted()}")
    (schema,) = table_schemas(mariadb, types).values()
    quiet = server_position(cfg)
    read = read_in_view(cfg, info, schema, ChunkRange(None, None), engine=engine)
    assert read.rows.num_rows == 0
    assert read.rows.schema == arrow_schema(schema)
    assert read.position == quiet
