"""A system-versioned table's row events as changes of its current rows, against a model of
MariaDB's versioning: the binlog a server writes for each statement (as found on MariaDB
10.11 with ``mysqlbinlog -v``, ``tests/integration/test_system_versioned_tables.py``), turned
into changes by the rule, replayed onto a dict of current rows (as the stream's merge and
the chunk correction do), equals the model's current rows."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.errors import SourceError
from airflow_cdc.model import (
    BinlogPosition,
    ChangeEvent,
    ChangeKind,
    SchemaEvent,
    SystemVersioning,
    TableId,
    TableSchema,
)
from airflow_cdc.model.schema_change import DdlKind, SchemaChange
from airflow_cdc.snapshot.correction import fold, rows_at_high_watermark
from airflow_cdc.source.system_versioning import (
    ROW_END_MAXIMA,
    current_change,
    current_items,
    is_current,
)
from tests.unit.test_model_table_schema import COLUMNS

TABLE = TableId("db", "t")
VERSIONING = SystemVersioning("since", "until")
MAX = ROW_END_MAXIMA[0]
EPOCH = dt.datetime(2026, 1, 1)

# Statements on keys 0..9: (statement, key, other key, value).
statements = st.lists(
    st.tuples(
        st.sampled_from(
            ["insert", "update", "move", "delete", "replace", "delete_history", "unversioned"]
        ),
        st.integers(0, 9),
        st.integers(0, 9),
        st.integers(0, 99),
    ),
    max_size=50,
)


class Server:
    """The model: every version of every row, and the row events the binlog gets."""

    def __init__(self) -> None:
        self.current: dict[int, tuple[int, dt.datetime]] = {}  # key -> (value, row_start)
        self.history: list[tuple[int, int, dt.datetime, dt.datetime]] = []
        self.events: list[ChangeEvent] = []
        self.clock = 0

    def now(self) -> dt.datetime:
        self.clock += 1
        return EPOCH + dt.timedelta(seconds=self.clock)

    def image(self, key: int, value: int, start: dt.datetime, end: dt.datetime) -> dict[str, Any]:
        return {"id": key, "v": value, "since": start, "until": end}

    def key_image(self, key: int, end: dt.datetime) -> dict[str, Any]:
        """A before-image as the reader decodes it: the identity columns, the rest None."""
        return {"id": key, "v": None, "since": None, "until": end}

    def log(self, kind: ChangeKind, before: Any, after: Any) -> None:
        at = BinlogPosition("b.000001", 1000, len(self.events))
        self.events.append(ChangeEvent(TABLE, kind, at, before, after))

    def end_version(self, key: int, now: dt.datetime) -> None:
        """The current row of ``key`` becomes history: an update setting its row end."""
        value, start = self.current.pop(key)
        self.log(ChangeKind.UPDATE, self.key_image(key, MAX), self.image(key, value, start, now))
        self.history.append((key, value, start, now))

    def run(self, statement: str, key: int, other: int, value: int) -> None:
        now = self.now()
        if statement == "insert" and key not in self.current:
            self.current[key] = (value, now)
            self.log(ChangeKind.INSERT, None, self.image(key, value, now, MAX))
        elif statement in ("update", "move") and key in self.current:
            target = other if statement == "move" else key
            if target != key and target in self.current:
                return  # a duplicate key: the statement fails
            old, start = self.current.pop(key)
            self.current[target] = (value, now)
            self.log(
                ChangeKind.UPDATE, self.key_image(key, MAX), self.image(target, value, now, MAX)
            )
            self.log(ChangeKind.INSERT, None, self.image(key, old, start, now))
            self.history.append((key, old, start, now))
        elif statement == "delete" and key in self.current:
            self.end_version(key, now)
        elif statement == "replace":
            if key in self.current:
                self.end_version(key, now)
            self.current[key] = (value, now)
            self.log(ChangeKind.INSERT, None, self.image(key, value, now, MAX))
        elif statement == "delete_history":
            for old_key, _, _, end in self.history:
                self.log(ChangeKind.DELETE, self.key_image(old_key, end), None)
            self.history.clear()
        elif statement == "unversioned" and key in self.current:  # WITHOUT SYSTEM VERSIONING
            start = self.current[key][1]
            self.current[key] = (value, start)
            self.log(
                ChangeKind.UPDATE, self.key_image(key, MAX), self.image(key, value, start, MAX)
            )

    def rows(self) -> dict[int, dict[str, int]]:
        return {key: {"id": key, "v": value} for key, (value, _) in self.current.items()}


def replay(events: list[ChangeEvent], rows: dict[int, Any]) -> dict[int, Any]:
    """Changes applied as the lake's merge applies them: a before-image removes its key,
    an after-image puts its row."""
    state = dict(rows)
    for event in events:
        if event.before is not None:
            state.pop(event.before["id"], None)
        if event.after is not None:
            state[event.after["id"]] = dict(event.after)
    return state


def changes(events: list[ChangeEvent]) -> list[ChangeEvent]:
    return [c for c in (current_change(e, VERSIONING) for e in events) if c is not None]


@given(statements, statements)
def test_the_changes_make_the_current_rows(first: Any, then: Any) -> None:
    server = Server()
    for statement in first:
        server.run(*statement)
    at_start = server.rows()
    server.events.clear()
    for statement in then:
        server.run(*statement)
    found = changes(server.events)
    assert replay(found, at_start) == server.rows()
    for change in found:  # no history row, no versioning column, reaches the lake
        for image in (change.before, change.after):
            assert image is None or set(image) == {"id", "v"}
        assert (change.kind is ChangeKind.INSERT) == (change.before is None)
        assert (change.kind is ChangeKind.DELETE) == (change.after is None)


@given(statements, statements, st.integers(0, 9), st.integers(0, 10))
def test_a_chunk_corrected_with_the_changes_holds_its_current_rows(
    first: Any, then: Any, lo: int, width: int
) -> None:
    """The chunk's correction (``snapshot.correction``) over the rule's changes: rows read
    at the low watermark, the window folded onto them, are the chunk's current rows."""
    server = Server()
    for statement in first:
        server.run(*statement)
    hi = lo + width
    read = {(k,): row for k, row in server.rows().items() if lo <= k < hi}
    server.events.clear()
    for statement in then:
        server.run(*statement)
    final = fold(changes(server.events), lambda row: (row["id"],), lambda k: lo <= k[0] < hi)
    expected = {(k,): row for k, row in server.rows().items() if lo <= k < hi}
    assert rows_at_high_watermark(read, final) == expected


@given(st.datetimes(min_value=dt.datetime(1970, 1, 1, 0, 0, 1), max_value=dt.datetime(2200, 1, 1)))
def test_a_row_is_current_at_a_maximum_only_naive_or_aware(value: dt.datetime) -> None:
    assert is_current(value, TABLE, "until") == (value in ROW_END_MAXIMA)
    aware = value.replace(tzinfo=dt.UTC).astimezone(dt.timezone(dt.timedelta(hours=5, minutes=30)))
    assert is_current(aware, TABLE, "until") == (value in ROW_END_MAXIMA)


@pytest.mark.parametrize(
    "value", [dt.datetime(1969, 12, 31, 23, 59, 59, 999999), dt.datetime(1970, 1, 1), None, 0]
)
def test_a_row_end_no_timestamp_holds_stops_the_reader_naming_it(value: Any) -> None:
    with pytest.raises(SourceError, match=r"db\.t has until = .*cannot tell whether"):
        is_current(value, TABLE, "until")


def test_an_image_without_its_row_end_stops_the_reader() -> None:
    event = ChangeEvent(TABLE, ChangeKind.INSERT, BinlogPosition("b.000001", 4), None, {"id": 1})
    with pytest.raises(SourceError, match="has no until column"):
        current_change(event, VERSIONING)


def test_items_of_other_tables_and_statements_pass_as_they_are() -> None:
    plain = TableSchema(TableId("db", "plain"), COLUMNS, ("c",))
    versioned = TableSchema(TABLE, COLUMNS, ("c",), versioning=VERSIONING)
    schemas = {plain.table: plain, TABLE: versioned}
    at = BinlogPosition("b.000001", 4)
    other = ChangeEvent(plain.table, ChangeKind.INSERT, at, None, {"c": 1, "until": 5})
    history = ChangeEvent(TABLE, ChangeKind.INSERT, at, None, {"c": 1, "until": EPOCH})
    live = ChangeEvent(TABLE, ChangeKind.INSERT, at, None, {"c": 2, "since": EPOCH, "until": MAX})
    ddl = SchemaEvent(at, SchemaChange(DdlKind.TRUNCATE, TABLE), "TRUNCATE t")

    def items() -> Iterator[Any]:
        yield from (other, history, ddl, live)

    got = list(current_items(items(), schemas))
    assert got == [other, ddl, ChangeEvent(TABLE, ChangeKind.INSERT, at, None, {"c": 2})]
