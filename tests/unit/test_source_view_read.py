"""``source.view_read`` against a fake connectorx: what the read sends to its connection,
how it takes the view's position out of the rows, what it refuses, and that MySQL is
refused before anything connects (no MySQL server runs here; the real reads are
``tests/integration/test_keyless_partition_read.py``)."""

from __future__ import annotations

from typing import Any

import connectorx
import pyarrow as pa
import pytest

from airflow_cdc.config import SourceConfig
from airflow_cdc.errors import (
    BinlogSettingsError,
    ConfigurationError,
    SourceError,
    SourceSwitchedError,
)
from airflow_cdc.model import BinlogPosition, ChunkRange, Column, TableId, TableSchema
from airflow_cdc.source import view_read
from airflow_cdc.source.server import ServerInfo
from airflow_cdc.source.view_read import ViewRead, read_in_view, split_position

SCHEMA = TableSchema(
    TableId("shop", "log"),
    (Column("c", "int", "int(11)", False), Column("v", "varchar", "varchar(4)", False)),
    ("c",),
)
MARIADB = ServerInfo("mariadb", (10, 11, 6), server_id=7, epoch=3)
MYSQL = ServerInfo("mysql", (8, 4, 2), server_id=7, epoch=3)
SECRET = "p@ss/w:rd%"
SOURCE = SourceConfig(host="db.example", user="cdc", password=SECRET)
FILE = "mysql-bin.000004"


def answer(
    rows: list[tuple[int, str]],
    *,
    files: list[str | None] | None = None,
    offsets: list[str | None] | None = None,
    servers: list[int] | None = None,
    markers: list[int] | None = None,
    marked: bool = False,
) -> pa.Table:
    """What connectorx returns for the range's SELECT (``rows_sql``): ``rows``, each with the
    position (``mysql-bin.000004:1923``, server 7) unless given; ``marked``: for the SELECT
    with the marker row (``marker_sql``), the rows then the marker row."""
    n = len(rows) + marked
    columns = {
        "c": pa.array([r[0] for r in rows] + [None] * marked, pa.int32()),
        "v": pa.array([r[1] for r in rows] + [None] * marked, pa.string()),
        "f": pa.array(files or [FILE] * n, pa.string()),
        "o": pa.array(offsets or ["1923"] * n, pa.string()),
        "s": pa.array(servers or [7] * n, pa.uint64()),
    }
    if marked:
        columns["m"] = pa.array(markers or [0] * (n - 1) + [1], pa.int32())
    return pa.table(columns)


class FakeConnectorx:
    """Stands in for ``connectorx.read_sql``: records each call, returns ``tables`` in turn
    (the last one again once they are used up)."""

    def __init__(self, *tables: pa.Table | BaseException) -> None:
        self.tables = list(tables)
        self.calls: list[dict[str, Any]] = []

    @property
    def table(self) -> pa.Table | BaseException:
        return self.tables[0]

    @table.setter
    def table(self, table: pa.Table | BaseException) -> None:
        self.tables = [table]

    def __call__(self, url: str, sql: str, **kwargs: Any) -> pa.Table:
        self.calls.append({"url": url, "sql": sql, **kwargs})
        found = self.tables[min(len(self.calls), len(self.tables)) - 1]
        if isinstance(found, BaseException):
            raise found
        return found


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeConnectorx:
    found = FakeConnectorx(answer([(1, "a"), (1, "a"), (4, "b")]))
    monkeypatch.setattr(connectorx, "read_sql", found)
    return found


def read(**kwargs: Any) -> ViewRead:
    return read_in_view(SOURCE, MARIADB, SCHEMA, ChunkRange((0,), (10,)), **kwargs)


def test_the_view_opens_on_the_reads_connection_and_its_position_comes_back(
    fake: FakeConnectorx,
) -> None:
    result = read(in_view=["DO SLEEP(1)"])

    (call,) = fake.calls
    assert call["pre_execution_query"] == [
        "SET time_zone = '+00:00'",
        "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ",
        "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
        "DO SLEEP(1)",
    ]
    assert call["sql"].endswith("WHERE ((`c` >= 0)) AND ((`c` < 10))")  # no marker row
    assert call["sql"].count("'BINLOG_SNAPSHOT_POSITION'") == 1
    assert result.position == BinlogPosition(FILE, 1923, 0, 3)
    assert result.rows.to_pylist() == [{"c": 1, "v": "a"}, {"c": 1, "v": "a"}, {"c": 4, "v": "b"}]
    assert result.rows.schema == pa.schema(
        [pa.field("c", pa.int32(), nullable=False), pa.field("v", pa.string())]
    )


def test_an_empty_partition_is_read_again_with_the_marker_row(fake: FakeConnectorx) -> None:
    fake.tables = [answer([]), answer([], offsets=["2146"], marked=True)]
    result = read(in_view=["DO SLEEP(1)"])

    first, again = fake.calls
    assert "UNION ALL" not in first["sql"]
    assert (
        "WHERE ((`c` >= 0)) AND ((`c` < 10)) UNION ALL SELECT MAX(`c`), MAX(`v`)," in again["sql"]
    )
    assert again["sql"].count("'BINLOG_SNAPSHOT_POSITION'") == 2  # the rows and the marker
    assert again["pre_execution_query"] == first["pre_execution_query"]  # a view of its own
    assert result.rows.num_rows == 0
    assert result.rows.schema == pa.schema(
        [pa.field("c", pa.int32(), nullable=False), pa.field("v", pa.string())]
    )
    assert result.position == BinlogPosition(FILE, 2146, 0, 3)  # the second view's


def test_rows_committed_before_the_second_view_come_with_its_position(
    fake: FakeConnectorx,
) -> None:
    fake.tables = [answer([]), answer([(2, "b")], offsets=["2146", "2146"], marked=True)]
    result = read()
    assert len(fake.calls) == 2
    assert result.rows.to_pylist() == [{"c": 2, "v": "b"}]
    assert result.position == BinlogPosition(FILE, 2146, 0, 3)


@pytest.mark.parametrize(
    "changes",
    [
        {"offsets": ["1923", "2146", "1923"]},
        {"files": [FILE, "mysql-bin.000005", FILE]},
        {"servers": [7, 8, 7]},
        {"offsets": ["1923", "1923", "2146"], "marked": True},
        {"markers": [0, 1, 1], "marked": True},
        {"markers": [0, 0, 0], "marked": True},
    ],
    ids=["offsets", "files", "servers", "marker's offset", "two markers", "no marker"],
)
def test_rows_not_of_one_view_are_refused(fake: FakeConnectorx, changes: dict[str, Any]) -> None:
    """Three values per column: three rows, or (marked: the SELECT with the marker row, read
    after an empty first read) two rows and the marker row."""
    if changes.get("marked"):
        fake.tables = [answer([]), answer([(1, "a"), (4, "b")], **changes)]
    else:
        fake.table = answer([(1, "a"), (4, "b"), (4, "b")], **changes)
    with pytest.raises(SourceError, match=r"not of one read view|position rows, not 1"):
        read()


def test_a_view_on_another_server_is_a_switched_source(fake: FakeConnectorx) -> None:
    fake.table = answer([(1, "a")], servers=[8])
    with pytest.raises(SourceSwitchedError, match="server_id 8"):
        read()


def test_no_snapshot_file_means_the_binlog_is_off(fake: FakeConnectorx) -> None:
    fake.table = answer([(1, "a")], files=[None], offsets=[None])
    with pytest.raises(BinlogSettingsError, match="log_bin"):
        read()


def test_a_driver_error_names_the_read_and_not_the_password(fake: FakeConnectorx) -> None:
    fake.table = RuntimeError(f"cannot connect to {SOURCE.url()} (password {SECRET})")
    with pytest.raises(SourceError) as raised:
        read()
    message = str(raised.value)
    assert message.startswith("reading shop.log [0, 10) failed: cannot connect to mysql://cdc:")
    assert SECRET not in message
    assert "p%40ss" not in message
    assert "***" in message


@pytest.mark.parametrize("engine", ["connectorx", "pymysql"])
def test_mysql_is_refused_before_anything_connects(
    monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("nothing may connect")

    monkeypatch.setattr(connectorx, "read_sql", refuse)
    monkeypatch.setattr(view_read, "connect", refuse)
    with pytest.raises(SourceError, match="BINLOG_SNAPSHOT_POSITION") as raised:
        read_in_view(SOURCE, MYSQL, SCHEMA, ChunkRange(None, None), engine=engine)
    assert "MySQL 8.4.2" in str(raised.value)
    assert "LOCK TABLES" in str(raised.value)


def test_an_unknown_engine_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="read engine"):
        read(engine="odbc")


def test_split_position_keeps_the_tables_columns_only() -> None:
    for raw in (answer([(2, "b")]), answer([(2, "b")], marked=True)):
        rows, position = split_position(raw, 2)
        assert rows.column_names == ["c", "v"]
        assert rows.to_pylist() == [{"c": 2, "v": "b"}]
        assert position == (FILE, "1923", 7)


def test_split_position_refuses_a_read_with_no_row_to_carry_the_position() -> None:
    with pytest.raises(SourceError, match="no row to carry"):
        split_position(answer([]), 2)


def test_split_position_refuses_other_columns() -> None:
    with pytest.raises(SourceError, match="returned 5 columns, not 3"):
        split_position(answer([(2, "b")]), 3)
