"""Table schemas and chunk keys from information_schema."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from airflow_cdc.config import SourceConfig
from airflow_cdc.errors import TableError
from airflow_cdc.model import Column, TableId
from airflow_cdc.source.catalog import key_problem, load_table_schema
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


def test_no_key_at_all(mariadb: LocalMariaDB, fresh_db: str, cdc: Any) -> None:
    """No primary key, no unique index on NOT NULL columns: keyless (issue 47), its
    chunking column left to the plan, or the one NOT NULL column chunk_keys names; two
    columns, or a nullable one, are refused; a unique index makes the table keyed."""
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.log (id INT NOT NULL, n INT NULL, w INT NOT NULL, msg TEXT,"
        " KEY (id), UNIQUE KEY by_n (n))"
    )
    table = TableId(fresh_db, "log")
    schema = load_table_schema(cdc, table)
    assert (schema.keyless, schema.key) == (True, ())
    chunked = load_table_schema(cdc, table, chunk_key="ID")
    assert (chunked.keyless, chunked.key, chunked.columns) == (True, ("id",), schema.columns)
    with pytest.raises(TableError, match="chunked by one column"):
        load_table_schema(cdc, table, chunk_key=("id", "w"))
    with pytest.raises(TableError, match=r"may be NULL.*MODIFY `n` int\(11\) NOT NULL"):
        load_table_schema(cdc, table, chunk_key="n")
    assert "not covered by a unique index" in (key_problem(cdc, table, ("id",)) or "")
    mariadb.execute(f"ALTER TABLE `{fresh_db}`.log ADD UNIQUE (id)")
    keyed = load_table_schema(cdc, table, chunk_key="ID")
    assert (keyed.keyless, keyed.key) == (False, ("id",))
    assert load_table_schema(cdc, table).key == ("id",)  # the rule takes the index too
    assert key_problem(cdc, table, ("id",)) is None


def test_a_unique_index_on_not_null_columns_is_the_key_without_a_primary_key(
    mariadb: LocalMariaDB, fresh_db: str, cdc: Any
) -> None:
    """The first usable unique index in the server's order: not one allowing NULL, nor one
    on an ENUM, nor one on a column prefix while a whole one exists, and not the first by
    name; a chunk key given still wins; a primary key added takes over."""
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.t (n INT NULL, e ENUM('x','y') NOT NULL, "
        "c VARCHAR(20) NOT NULL, b INT NOT NULL, a INT NOT NULL, v INT, "
        "UNIQUE KEY a_n (n), UNIQUE KEY a_e (e), UNIQUE KEY a_c (c(5)), "
        "UNIQUE KEY z_ba (b, a), UNIQUE KEY y_a (a), KEY a_v (v))"
    )
    table = TableId(fresh_db, "t")
    schema = load_table_schema(cdc, table)
    assert (schema.key, schema.key_index) == (("b", "a"), "z_ba")
    given = load_table_schema(cdc, table, chunk_key=["a"])
    assert (given.key, given.key_index) == (("a",), None)
    mariadb.execute(f"ALTER TABLE `{fresh_db}`.t DROP INDEX z_ba")
    assert load_table_schema(cdc, table).key == ("a",)
    mariadb.execute(f"ALTER TABLE `{fresh_db}`.t DROP INDEX y_a")
    assert load_table_schema(cdc, table).key == ("c",)  # a prefix keeps rows apart too
    mariadb.execute(f"ALTER TABLE `{fresh_db}`.t ADD PRIMARY KEY (v)")
    schema = load_table_schema(cdc, table)
    assert (schema.key, schema.key_index) == (("v",), "PRIMARY")


def test_key_problem_says_when_a_key_no_longer_identifies_rows(
    mariadb: LocalMariaDB, fresh_db: str, cdc: Any
) -> None:
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (u INT NOT NULL, v INT, UNIQUE KEY uk (u))")
    table = TableId(fresh_db, "t")
    assert key_problem(cdc, table, ("u",)) is None
    mariadb.execute(f"ALTER TABLE `{fresh_db}`.t MODIFY u INT NULL")
    assert "may be NULL" in (key_problem(cdc, table, ("u",)) or "")
    mariadb.execute(f"ALTER TABLE `{fresh_db}`.t MODIFY u INT NOT NULL, DROP INDEX uk")
    assert "not covered by a unique index" in (key_problem(cdc, table, ("u",)) or "")
    assert key_problem(cdc, TableId(fresh_db, "gone"), ("u",)) is None  # the stream meets it


def test_bad_chunk_keys(mariadb: LocalMariaDB, fresh_db: str, cdc: Any) -> None:
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.t (n INT NULL, m INT NOT NULL, u INT NOT NULL, v INT NOT NULL,"
        " UNIQUE (n), KEY (m), UNIQUE (u, v))"
    )
    table = TableId(fresh_db, "t")
    with pytest.raises(TableError, match=r"may be NULL.*MODIFY `n` int\(11\) NOT NULL"):
        load_table_schema(cdc, table, chunk_key=["n"])
    # t is keyed by UNIQUE (u, v): a column no unique index covers would make it keyless.
    with pytest.raises(
        TableError, match=r"not covered by a unique index.*ADD UNIQUE \(`m`\).*unique index u"
    ):
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
