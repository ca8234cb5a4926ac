"""Type-canonical fingerprints (``verify.canonical``): for every type of the type mapping, the
server's canonical text of a value (SQL) and DuckDB's over the value the lake holds are the
same text, column by column, for values written by the snapshot and by the binlog path; so
are the rows' fingerprints and the keys' texts.

The table is the type-fidelity test's (edge values, NULL in every column), on the real
MariaDB, snapshotted and streamed with the product's own code in-process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest
from deltalake import DeltaTable

from airflow_cdc.model import TableId, TableSchema
from airflow_cdc.sinks.delta import DeltaSink
from airflow_cdc.source.connection import connect, fetch_all
from airflow_cdc.verify.canonical import (
    column_form,
    duckdb_key_text,
    duckdb_row_hash,
    mysql_key_text,
    mysql_row_hash,
    notes,
)
from devtools.local_mariadb import LocalMariaDB
from tests.support.pipeline import snapshot_table, source_config, table_schema
from tests.support.type_matrix import (
    binlog_rows_and_updates,
    create_types_table,
    create_zero_dates_table,
    stream_in_process,
)

pytestmark = pytest.mark.integration


def source_side(server: LocalMariaDB, schema: TableSchema, expression: str) -> dict[Any, Any]:
    conn = connect(source_config(server))
    try:
        table = schema.table.quoted().replace("%", "%%")
        rows = fetch_all(conn, f"SELECT id, {expression} FROM {table}", [])
        return {row[0]: row[1] for row in rows}
    finally:
        conn.close()


def lake_side(lake: Path, schema: TableSchema, expression: str) -> dict[Any, Any]:
    db = duckdb.connect()
    db.execute("SET TimeZone = 'UTC'")
    db.register(
        "lake", DeltaTable(DeltaSink(str(lake)).table_uri(schema.table)).to_pyarrow_dataset()
    )
    rows = db.execute(f'SELECT id, {expression} FROM lake WHERE NOT "_cdc_deleted"').fetchall()
    return {row[0]: row[1] for row in rows}


def test_every_type_has_one_canonical_text_on_both_sides(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    table = create_types_table(mariadb, fresh_db)
    meta, lake = snapshot_table(mariadb, table, tmp_path)
    mariadb.execute(*binlog_rows_and_updates(fresh_db))  # the binlog path
    stream_in_process(mariadb, meta, lake, [table])
    schema = table_schema(mariadb, table)

    problems = []
    for column in schema.columns:
        form = column_form(column)
        # As text, as the row's CONCAT_WS takes each value.
        want = source_side(mariadb, schema, f"CAST({form.mysql} AS CHAR)")
        got = lake_side(lake, schema, form.duckdb)
        assert sorted(want) == sorted(got) == [1, 2, 3, 4, 5, 11, 12, 13, 14, 15]
        problems += [
            f"{column.name} ({column.column_type}) id {row}: source {want[row]!r}, lake {got[row]!r}"
            for row in want
            if want[row] != got[row]
        ]
    assert not problems, "\n".join(problems)
    rows_source = source_side(mariadb, schema, mysql_row_hash(schema))
    rows_lake = lake_side(lake, schema, duckdb_row_hash(schema))
    assert rows_source == rows_lake
    assert len(set(rows_source.values())) == len(rows_source)  # rows that differ, hashes too
    assert source_side(mariadb, schema, mysql_key_text(schema)) == lake_side(
        lake, schema, duckdb_key_text(schema)
    )
    assert notes(schema) == [
        "c_float (float): compared to 6 significant digits",
        "c_double (double): compared to 12 significant digits",
    ]


def test_null_and_empty_and_shifted_values_hash_differently(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """The canonical text keeps NULL apart from '' and from the text N, and a value apart
    from two (each value carries its length): pairs that a plain join would make one."""
    db = fresh_db
    mariadb.execute(
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, a VARCHAR(9), b VARCHAR(9))",
        f"INSERT INTO `{db}`.t VALUES (1, NULL, ''), (2, '', NULL), (3, 'x|y', ''), "
        "(4, 'x', 'y|'), (5, 'N', NULL), (6, NULL, 'N')",
    )
    _, lake = snapshot_table(mariadb, TableId(db, "t"), tmp_path)
    schema = table_schema(mariadb, TableId(db, "t"))
    values = TableSchema(schema.table, (schema.column("a"), schema.column("b")), ("a",))
    source = source_side(mariadb, schema, mysql_row_hash(values))
    assert len(set(source.values())) == 6
    assert lake_side(lake, schema, duckdb_row_hash(values)) == source


def test_zero_dates_are_no_date_on_both_sides(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """A zero date (or a zero month or day) is NULL in the lake; its canonical text on the
    server is NULL too, so a table holding some verifies clean."""
    db = fresh_db
    create_zero_dates_table(mariadb, db)
    _, lake = snapshot_table(mariadb, TableId(db, "z"), tmp_path)
    schema = table_schema(mariadb, TableId(db, "z"))
    assert source_side(mariadb, schema, mysql_row_hash(schema)) == lake_side(
        lake, schema, duckdb_row_hash(schema)
    )
