"""Table schemas and chunk keys from information_schema."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from airflow_cdc.config import SourceConfig
from airflow_cdc.errors import TableError
from airflow_cdc.model import Column, TableId
from airflow_cdc.source.catalog import load_table_schema
from airflow_cdc.source.connection import connect
from devtools.local_mariadb import LocalMariaDB

pytestmark = pytest.mark.integration


@pytest.fixture
def cdc(mariadb: LocalMariaDB) -> Iterator[Any]:
    conn = connect(SourceConfig("127.0.0.1", mariadb.port, "cdc", mariadb.cdc_password))
    yield conn
    conn.close()


def test_columns_and_composite_primary_key(mariadb: LocalMariaDB, fresh_db: str, cdc: Any) -> None:
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.`we``ird` (a INT NOT NULL, b VARCHAR(10) COLLATE utf8mb4_bin NOT NULL,"
        " amount DECIMAL(12,2) NULL, at DATETIME(3) NOT NULL, dbl INT AS (a * 2) VIRTUAL,"
        " PRIMARY KEY (b, a))"
    )
    schema = load_table_schema(cdc, TableId(fresh_db, "we`ird"))
    assert schema.key == ("b", "a")
    assert [c.name for c in schema.columns] == ["a", "b", "amount", "at", "dbl"]
    assert schema.column("b") == Column(
        "b", "varchar", "varchar(10)", False, charset="utf8mb4", collation="utf8mb4_bin"
    )
    amount = schema.column("amount")
    assert (amount.nullable, amount.precision, amount.scale) == (True, 12, 2)
    assert schema.column("at").datetime_precision == 3
    assert schema.column("dbl").generated
    assert not schema.column("a").generated


def test_no_primary_key(mariadb: LocalMariaDB, fresh_db: str, cdc: Any) -> None:
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.log (id INT NOT NULL, msg TEXT, UNIQUE (id))")
    with pytest.raises(TableError) as info:
        load_table_schema(cdc, TableId(fresh_db, "log"))
    assert (
        f"table {fresh_db}.log has no primary key; give a chunk key column that is unique and not null (param chunk_keys"
        in str(info.value)
    )
    assert load_table_schema(cdc, TableId(fresh_db, "log"), chunk_key="ID").key == ("id",)


def test_bad_chunk_keys(mariadb: LocalMariaDB, fresh_db: str, cdc: Any) -> None:
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.t (n INT NULL, m INT NOT NULL, u INT NOT NULL, v INT NOT NULL,"
        " UNIQUE (n), KEY (m), UNIQUE (u, v))"
    )
    table = TableId(fresh_db, "t")
    with pytest.raises(TableError, match=r"may be NULL.*MODIFY `n` int\(11\) NOT NULL"):
        load_table_schema(cdc, table, chunk_key=["n"])
    with pytest.raises(TableError, match=r"not covered by a unique index.*ADD UNIQUE \(`m`\)"):
        load_table_schema(cdc, table, chunk_key=["m"])
    with pytest.raises(TableError, match="not covered by a unique index"):
        load_table_schema(cdc, table, chunk_key=["u"])
    with pytest.raises(TableError, match=r"column\(s\) nope not found"):
        load_table_schema(cdc, table, chunk_key=["nope"])
    assert load_table_schema(cdc, table, chunk_key=("u", "v")).key == ("u", "v")
    assert load_table_schema(cdc, table, chunk_key=("u", "v", "m")).key == ("u", "v", "m")


def test_enum_key_rejected(mariadb: LocalMariaDB, fresh_db: str, cdc: Any) -> None:
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.e (k ENUM('b','a') PRIMARY KEY)")
    with pytest.raises(TableError, match=r"k \(enum\('b','a'\)\)"):
        load_table_schema(cdc, TableId(fresh_db, "e"))


def test_missing_table(cdc: Any, fresh_db: str) -> None:
    with pytest.raises(TableError, match="not found"):
        load_table_schema(cdc, TableId(fresh_db, "nope"))
