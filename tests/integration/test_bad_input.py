"""Bad input against the real MariaDB: each case fails with an error that names the fix, and
nothing is written (no plan in the metadata DB, no Delta table, no stream state).

Most cases run the plan task (``PlanSnapshotOperator``), the first task of both DAGs, with a
SQLite metadata DB; where the message gives a statement to run, the test runs it and checks
that it fixes the problem. Server settings changed here are global to the session's server,
so each test puts the old value back in ``finally``.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.errors import (
    BinlogSettingsError,
    ConfigurationError,
    MetadataError,
    PrivilegeError,
    StreamLeaseError,
    TableError,
)
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import TableId
from airflow_cdc.operators.plan import PlanSnapshotOperator
from devtools.local_mariadb import LocalMariaDB
from tests.support.pipeline import stream_spec
from tests.support.task_instance import RecordingTI

pytestmark = pytest.mark.integration


@pytest.fixture
def meta(mariadb: LocalMariaDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The Airflow connections of the plan task: the cdc user, a SQLite file (not created)."""
    path = tmp_path / "meta.db"
    monkeypatch.setenv("AIRFLOW_CONN_CDC_SOURCE", mariadb.url())
    monkeypatch.setenv("AIRFLOW_CONN_CDC_METADATA", f"sqlite:///{path}")
    return path


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    return tmp_path / "lake"


@pytest.fixture
def make_user(mariadb: LocalMariaDB, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Creates a user with the given grants and makes it the plan task's source user."""
    made: list[str] = []

    def make(name: str, *grants: str) -> None:
        mariadb.execute(
            f"DROP USER IF EXISTS '{name}'@'%'",
            f"CREATE USER '{name}'@'%' IDENTIFIED BY 'pw-{name}'",
            *(f"GRANT {grant} TO '{name}'@'%'" for grant in grants),
        )
        made.append(name)
        monkeypatch.setenv("AIRFLOW_CONN_CDC_SOURCE", mariadb.url(name, f"pw-{name}"))

    yield make
    for name in made:
        mariadb.execute(f"DROP USER IF EXISTS '{name}'@'%'")


@pytest.fixture
def global_variable(mariadb: LocalMariaDB) -> Iterator[Any]:
    """Sets a global server variable for one test and restores it (the server is shared)."""
    saved: dict[str, str] = {}

    def set_global(name: str, value: str) -> None:
        if name not in saved:
            saved[name] = str(mariadb.query(f"SELECT @@GLOBAL.{name}")[0][0])
        mariadb.execute(f"SET GLOBAL {name} = '{value}'")

    try:
        yield set_global
    finally:
        for name, value in saved.items():
            mariadb.execute(f"SET GLOBAL {name} = '{value}'")


def plan_task(lake: Path, tables: list[str], **kwargs: Any) -> list[dict[str, Any]]:
    """Run the plan task as the DAG does (after rendering)."""
    kwargs.setdefault("chunking", {"chunk_rows": 100})
    op = PlanSnapshotOperator(task_id="plan", tables=tables, sink_path=str(lake), **kwargs)
    context: Any = {"run_id": "manual__bad", "ti": RecordingTI()}
    result: list[dict[str, Any]] = op.execute(context)
    return result


def plans_in(meta: Path) -> int:
    """Plans stored in the metadata DB (0 when the file was never created)."""
    if not meta.exists():
        return 0
    with sqlite3.connect(meta) as db:
        return int(db.execute("SELECT COUNT(*) FROM cdc_plans").fetchone()[0])


def assert_nothing_written(meta: Path, lake: Path) -> None:
    assert plans_in(meta) == 0
    assert not lake.exists()


def grants_in(message: str) -> list[str]:
    """The GRANT statements an error message gives, in order."""
    return re.findall(r"GRANT .+? TO '[^']*'@'[^']*'", message)


# -- keys ----------------------------------------------------------------------------------------


def test_a_table_without_a_key_is_planned_as_a_multiset(
    mariadb: LocalMariaDB, fresh_db: str, meta: Path, lake: Path, caplog: Any
) -> None:
    """A table with neither a primary key nor a unique index on NOT NULL columns is planned
    (issue 47: replicated as a multiset of rows, its chunks refusing it until that is
    built, ``tests/integration/test_keyless_plan.py``), chunked by its indexed NOT NULL
    column, and the plan says so; a unique index added makes it keyed by it, said too."""
    mariadb.execute(
        "CREATE TABLE heap (code VARCHAR(10) NOT NULL, v INT, KEY (code))",
        "INSERT INTO heap SELECT CONCAT('c', seq), seq FROM seq_1_to_50",
        database=fresh_db,
    )
    with caplog.at_level(logging.INFO, logger="airflow_cdc.planning"):
        assert plan_task(lake, [f"{fresh_db}.heap"])
    assert f"{fresh_db}.heap has no key: replicated as a multiset of rows, read whole" in (
        caplog.text
    )  # code's collation is not binary: Python cannot order it as the server does
    mariadb.execute("ALTER TABLE heap ADD UNIQUE (code)", database=fresh_db)
    with caplog.at_level(logging.INFO, logger="airflow_cdc.planning"):
        assert plan_task(lake, [f"{fresh_db}.heap"])
    assert plans_in(meta) == 2
    assert f"{fresh_db}.heap has no primary key: its key is the unique index code_2 (code)" in (
        caplog.text
    )


@pytest.mark.parametrize("problem", ["nullable", "not unique"])
def test_chunk_key_nullable_or_not_unique(
    mariadb: LocalMariaDB, fresh_db: str, meta: Path, lake: Path, problem: str
) -> None:
    """A chunk key must be NOT NULL, and, for a table with a key, unique; the message gives
    the ALTER TABLE that makes it so, and after running it the same plan works."""
    mariadb.execute(
        "CREATE TABLE heap (n INT NULL, m INT NOT NULL, u INT NOT NULL, UNIQUE KEY (n), KEY (m),"
        " UNIQUE KEY (u))",
        "INSERT INTO heap SELECT seq, seq, seq FROM seq_1_to_50",
        database=fresh_db,
    )
    column = "n" if problem == "nullable" else "m"
    chunk_keys = {f"{fresh_db}.heap": [column]}
    with pytest.raises(TableError) as raised:
        plan_task(lake, [f"{fresh_db}.heap"], chunk_keys=chunk_keys)
    message = str(raised.value)
    assert_nothing_written(meta, lake)
    if problem == "nullable":
        assert "chunk key column(s) n of" in message
        assert "may be NULL; a chunk key must be NOT NULL" in message
        fix = re.search(r"\((ALTER TABLE .+? NOT NULL)\)", message)
    else:
        assert "is not covered by a unique index, so rows could share a key" in message
        assert "leave chunk_keys out for it: it is keyed by the unique index u (u)" in message
        fix = re.search(r"\((ALTER TABLE .+? ADD UNIQUE \(`m`\))\)", message)
    assert "param chunk_keys" in message
    assert fix is not None, message
    mariadb.execute(fix.group(1))
    assert plan_task(lake, [f"{fresh_db}.heap"], chunk_keys=chunk_keys)
    assert plans_in(meta) == 1


# -- binlog settings (global, restored) ----------------------------------------------------------


@pytest.mark.parametrize("binlog_format", ["STATEMENT", "MIXED"])
def test_binlog_format_statement_or_mixed(
    mariadb: LocalMariaDB,
    fresh_db: str,
    meta: Path,
    lake: Path,
    global_variable: Any,
    binlog_format: str,
) -> None:
    """CDC reads row events: any other binlog format is refused before anything is read."""
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY)", database=fresh_db)
    global_variable("binlog_format", binlog_format)
    with pytest.raises(BinlogSettingsError) as raised:
        plan_task(lake, [f"{fresh_db}.t"])
    assert str(raised.value) == (
        f"binlog_format is {binlog_format} (CDC reads row events); set binlog_format=ROW in the "
        "server config ([mysqld] binlog_format=ROW) and restart"
    )
    assert_nothing_written(meta, lake)


@pytest.mark.parametrize("row_image", ["MINIMAL", "NOBLOB"])
def test_binlog_row_image_minimal_or_noblob(
    mariadb: LocalMariaDB,
    fresh_db: str,
    meta: Path,
    lake: Path,
    global_variable: Any,
    row_image: str,
) -> None:
    """Partial row images cannot rebuild a row: only FULL is accepted."""
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, b BLOB)", database=fresh_db)
    global_variable("binlog_row_image", row_image)
    with pytest.raises(BinlogSettingsError) as raised:
        plan_task(lake, [f"{fresh_db}.t"])
    assert str(raised.value) == (
        f"binlog_row_image is {row_image} (CDC needs whole rows); set binlog_row_image=FULL in "
        "the server config ([mysqld] binlog_row_image=FULL) and restart"
    )
    assert_nothing_written(meta, lake)


# -- privileges and tables -----------------------------------------------------------------------


def test_missing_replication_and_select_privileges(
    mariadb: LocalMariaDB, fresh_db: str, meta: Path, lake: Path, make_user: Any
) -> None:
    """A user without REPLICATION SLAVE, BINLOG MONITOR and SELECT gets one error listing the
    three GRANTs; running exactly those makes the plan work."""
    mariadb.execute(
        "CREATE TABLE t (id INT PRIMARY KEY)",
        "INSERT INTO t SELECT seq FROM seq_1_to_10",
        database=fresh_db,
    )
    make_user("cdc_bare", "USAGE ON *.*")
    with pytest.raises(PrivilegeError) as raised:
        plan_task(lake, [f"{fresh_db}.t"])
    message = str(raised.value)
    assert_nothing_written(meta, lake)
    grants = grants_in(message)
    assert grants == [
        "GRANT REPLICATION SLAVE ON *.* TO 'cdc_bare'@'%'",
        "GRANT BINLOG MONITOR ON *.* TO 'cdc_bare'@'%'",
        f"GRANT SELECT ON `{fresh_db}`.`t` TO 'cdc_bare'@'%'",
        f"GRANT SELECT ON `{fresh_db}`.* TO 'cdc_bare'@'%'",  # the alternative
    ]
    assert "missing privilege REPLICATION SLAVE (to read the binlog)" in message
    assert f"missing SELECT on {fresh_db}.t" in message
    mariadb.execute(*grants[:3])
    assert plan_task(lake, [f"{fresh_db}.t"])
    assert plans_in(meta) == 1


def test_a_table_that_does_not_exist(
    mariadb: LocalMariaDB, fresh_db: str, meta: Path, lake: Path
) -> None:
    """A misspelt table is named with the close match and where to correct it."""
    mariadb.execute("CREATE TABLE orders (id INT PRIMARY KEY)", database=fresh_db)
    with pytest.raises(TableError) as raised:
        plan_task(lake, [f"{fresh_db}.orders", f"{fresh_db}.ordres"])
    message = str(raised.value)
    assert (
        f"table(s) not found on the source: {fresh_db}.ordres (did you mean {fresh_db}.orders?)"
        in message
    )
    assert "Check the names in the DAG's tables setting" in message
    assert_nothing_written(meta, lake)


def test_awkward_names_in_bad_input_are_quoted_so_the_fixes_run(
    mariadb: LocalMariaDB, meta: Path, lake: Path, make_user: Any
) -> None:
    """Backticks, quotes, spaces, a dot, unicode and reserved words in the names: the errors'
    GRANT and ALTER statements are quoted so that they run as given (a backtick in a
    database name used to break the database-level GRANT)."""
    table = TableId("we`ird db.ü", 'ta"b`le ü')
    q = table.quoted()
    param = '`we``ird db.ü`.`ta"b``le ü`'
    assert TableId.parse(param) == table
    mariadb.execute("DROP DATABASE IF EXISTS `we``ird db.ü`", "CREATE DATABASE `we``ird db.ü`")
    try:
        mariadb.execute(
            f"CREATE TABLE {q} (`order` INT NULL, `select col` VARCHAR(10) NOT NULL, "
            "`ü` INT, UNIQUE KEY (`order`), KEY `we``ird` (`select col`))",
            f"INSERT INTO {q} SELECT seq, CONCAT('s', seq), seq FROM seq_1_to_30",
            database=table.database,  # the sequence engine's tables are per database
        )
        # Missing SELECT: both GRANTs given (table and database level) run as written.
        make_user("cdc_odd", "REPLICATION SLAVE, BINLOG MONITOR ON *.*")
        with pytest.raises(PrivilegeError) as raised:
            plan_task(lake, [param])
        grants = grants_in(str(raised.value))
        assert grants == [
            f"GRANT SELECT ON {q} TO 'cdc_odd'@'%'",
            "GRANT SELECT ON `we``ird db.ü`.* TO 'cdc_odd'@'%'",
        ]
        mariadb.execute(grants[1])  # the database-level one, the one that used to break
        assert_nothing_written(meta, lake)

        # A nullable reserved-word chunk key: the ALTER given runs, then the plan works.
        chunk_keys = {param: ["order"]}
        with pytest.raises(TableError) as nullable:
            plan_task(lake, [param], chunk_keys=chunk_keys)
        fix = re.search(r"\((ALTER TABLE .+? NOT NULL)\)", str(nullable.value))
        assert fix is not None, str(nullable.value)
        assert fix.group(1) == f"ALTER TABLE {q} MODIFY `order` int(11) NOT NULL"
        assert_nothing_written(meta, lake)
        mariadb.execute(fix.group(1))
        handles = plan_task(lake, [param], chunk_keys=chunk_keys)
        assert all(h["label"].startswith(str(table)) for h in handles), handles
        assert plans_in(meta) == 1
    finally:
        mariadb.execute("DROP DATABASE IF EXISTS `we``ird db.ü`")


# -- the backfill form ---------------------------------------------------------------------------


def test_backfill_form_value_carrying_sql(
    mariadb: LocalMariaDB, fresh_db: str, meta: Path, lake: Path
) -> None:
    """Form values are data: SQL typed into a string key's range is a key value bound as a
    parameter (nothing executed), and into an integer key's range a type error."""
    mariadb.execute(
        "CREATE TABLE codes (code VARCHAR(40) COLLATE utf8mb4_bin PRIMARY KEY)",
        "INSERT INTO codes SELECT CONCAT('c', LPAD(seq, 3, '0')) FROM seq_1_to_300",
        "CREATE TABLE nums (id INT PRIMARY KEY)",
        "INSERT INTO nums SELECT seq FROM seq_1_to_300",
        "CREATE TABLE canary (id INT PRIMARY KEY)",
        database=fresh_db,
    )
    backfill = {"allowed_tables": [f"{fresh_db}.codes", f"{fresh_db}.nums"], "join_stream": None}
    evil = "c100'); DROP TABLE canary; -- "
    with pytest.raises(ConfigurationError) as raised:
        plan_task(
            lake,
            [f"{fresh_db}.nums"],
            key_range={"lo": ["1; DROP TABLE canary"], "hi": None},
            **backfill,
        )
    assert "does not fit key column id int(11)" in str(raised.value)
    assert_nothing_written(meta, lake)

    handles = plan_task(
        lake, [f"{fresh_db}.codes"], key_range={"lo": [evil], "hi": ["c200"]}, **backfill
    )
    with MetadataStore.connect(f"sqlite:///{meta}") as store:
        chunks = store.plans.get(handles[0]["plan_id"]).chunks
    assert chunks[0].range.lo == (evil,)
    assert chunks[-1].range.hi == ("c200",)
    assert mariadb.query(f"SELECT COUNT(*) FROM `{fresh_db}`.canary") == [(0,)]
    assert mariadb.query(f"SELECT COUNT(*) FROM `{fresh_db}`.codes") == [(300,)]


# -- connections and paths -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "sqlite://",  # no path: Airflow's connection gives an in-memory DB
        "sqlite:///:memory:",
        "postgresql://cdc:Wr0ng-Meta-Pw@127.0.0.1:1/cdc_metadata",  # nothing listens on port 1
        "sqlite:////proc/no/such/folder/meta.db",
    ],
)
def test_a_wrong_metadata_db_url(
    mariadb: LocalMariaDB,
    fresh_db: str,
    lake: Path,
    monkeypatch: pytest.MonkeyPatch,
    url: str,
) -> None:
    """A metadata URL that cannot hold the plan fails the plan task, naming the connection
    and the fix, never the password; an in-memory SQLite DB (which no chunk job could see)
    used to be accepted silently."""
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY)", database=fresh_db)
    monkeypatch.setenv("AIRFLOW_CONN_CDC_SOURCE", mariadb.url())
    monkeypatch.setenv("AIRFLOW_CONN_CDC_METADATA", url)
    with pytest.raises(MetadataError) as raised:
        plan_task(lake, [f"{fresh_db}.t"])
    message = str(raised.value)
    assert "Airflow connection 'cdc_metadata'" in message
    assert "Fix:" in message
    assert "Wr0ng-Meta-Pw" not in message
    if "memory" in url or url == "sqlite://":
        assert "in-memory DB" in message
        assert "sqlite:////absolute/path/meta.db" in message
    assert not lake.exists()


def test_a_second_stream_for_the_same_tables(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path, lake: Path
) -> None:
    """A second copy of the stream (another run of the DAG, same stream id) and another
    stream sharing a table are both refused when they start, before Spark starts, naming the
    running stream and what to do; they write no lease, checkpoint, table request or Delta."""
    from airflow_cdc.spark.stream_job import run_stream

    mariadb.execute(
        "CREATE TABLE a (id INT PRIMARY KEY)",
        "CREATE TABLE b (id INT PRIMARY KEY)",
        database=fresh_db,
    )
    url = f"sqlite:///{tmp_path / 'meta.db'}"
    store = MetadataStore.connect(url)
    running = f"{socket.gethostname()}:{os.getpid()}:running"  # a live run: a token, unparsed
    store.streams.acquire_lease("mysql_cdc", [f"{fresh_db}.a", f"{fresh_db}.b"], running, 600)
    for stream_id, tables, shared in (
        ("mysql_cdc", [f"{fresh_db}.a", f"{fresh_db}.b"], False),
        ("other", [f"{fresh_db}.b"], True),
    ):
        checkpoint = tmp_path / f"ckpt-{stream_id}"
        spec = stream_spec(mariadb, tables, url, lake, checkpoint, stream_id=stream_id)
        job_file = spec.write(tmp_path / f"{stream_id}.json")
        with pytest.raises(StreamLeaseError) as raised:
            run_stream(spec, str(job_file))
        message = str(raised.value)
        assert message.startswith(
            f"stream mysql_cdc for tables {fresh_db}.a, {fresh_db}.b is already running "
            f"(owner {running}, lease until "
        )
        assert "stop it first, or wait " in message
        if shared:
            assert f"It already streams {fresh_db}.b: only one stream per set of tables" in message
            assert store.streams.state(stream_id) is None
        assert store.stream_tables.read(stream_id) == []
        assert not checkpoint.exists()
    state = store.streams.state("mysql_cdc")
    assert state is not None
    assert state.owner == running
    assert not lake.exists()
    store.close()
