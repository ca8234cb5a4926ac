"""No mask key on the wire: verify masks ``hash`` columns in its own process, and no
statement the source server receives holds the key or anything it can be recovered from.

Three tables with hashed columns, real MariaDB, Delta and SQLite metadata, the chunks and
the stream job's reader and batch function in-process: ``people`` (a plain key, ``email``
hashed, ``notes`` truncated), ``accounts`` (keyed by a hashed ``email``) and ``visits``
(no key, ``email`` hashed, every lake image held by two rows). With the server's general
log on (``log_output=TABLE``: every statement as the server received it) from before the
snapshot to the end:

1. each table verifies clean while the stream applies changes after the check's views
   are open (the lake's rows newer than the cut taken out of both sides: found by key on
   the server, or by their identity's text in the verify process);
2. differences planted outside the binlog (``sql_log_bin = 0``) in hashed and truncated
   columns are found, named as the lake holds them; a change beyond a truncation is none;
3. ``repair`` finds the ranges (of the table keyed by hash: its source keys, found by
   their hash in the verify process; its key only the lake has marked deleted), the
   repair's chunks run, and every table verifies clean again.

No statement in the log holds the key, its HMAC blocks (raw, hex, or quoted as the driver
quotes bytes), a session variable, an SHA2 call, or any hash made under the key (the
lake's hashed values); the log did record verify's reads of each table."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import hmac
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pymysql
import pytest

from airflow_cdc.config import LakeColumnsConfig, SinkConfig, VerifySettings
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import TableId
from airflow_cdc.model.lake_columns import MaskKey
from airflow_cdc.sinks.contract.cdc_columns import POSITION_COLUMN
from airflow_cdc.sinks.contract.formats import open_sink
from airflow_cdc.snapshot.unit import run_chunk
from airflow_cdc.source.catalog import load_table_schema
from airflow_cdc.source.connection import connect
from airflow_cdc.source.masking import hmac_pads
from airflow_cdc.source.server import server_info
from airflow_cdc.verify.run import TableOutcome, verify_tables
from devtools.local_mariadb import LocalMariaDB
from tests.support.pipeline import job_spec, plan, source_config, stream_spec
from tests.support.stream_harness import InProcessStream

pytestmark = pytest.mark.integration

KEY = "mask-key-that-never-reaches-the-server"
ROWS, CHUNK_ROWS = 60, 25


def _email(n: int) -> str:
    return f"person{n:04d}@example.org"


def _hashed(value: str) -> str:
    return hmac.new(KEY.encode(), value.encode(), hashlib.sha256).hexdigest()


def _create(mariadb: LocalMariaDB, db: str) -> list[TableId]:
    mariadb.execute(
        "CREATE TABLE people (id INT PRIMARY KEY, email VARCHAR(100), notes TEXT, age INT)",
        # a binary collation: the emit filter places its keys
        "CREATE TABLE accounts (email VARCHAR(100) COLLATE utf8mb4_bin NOT NULL PRIMARY KEY, "
        "tenant INT NOT NULL, balance INT NOT NULL)",
        "CREATE TABLE visits (c INT NOT NULL, email VARCHAR(100), notes TEXT, KEY (c))",
        "INSERT INTO people VALUES "
        + ", ".join(f"({n}, '{_email(n)}', 'note of {n}, long', {n})" for n in range(1, ROWS + 1)),
        "INSERT INTO accounts VALUES "
        + ", ".join(f"('{_email(n)}', {n % 3}, {n})" for n in range(1, ROWS + 1)),
        "INSERT INTO visits VALUES "  # rows n and n + 30: one image
        + ", ".join(f"({n % 6}, '{_email(n % 30)}', 'visit {n % 30}')" for n in range(ROWS)),
        database=db,
    )
    return [TableId(db, name) for name in ("people", "accounts", "visits")]


def _rules(db: str) -> LakeColumnsConfig:
    return LakeColumnsConfig(
        masks={
            f"{db}.people.email": "hash",
            f"{db}.people.notes": "truncate:10",
            f"{db}.accounts.email": "hash",
            f"{db}.visits.email": "hash",
        },
        mask_key=KEY,
    )


#: Changes of each table (by name) made while a check's views are open.
CHANGES = {
    "people": [
        f"UPDATE people SET email = '{_email(500)}', age = -3 WHERE id = 3",
        f"INSERT INTO people VALUES (100, '{_email(100)}', 'new', 1)",
        "DELETE FROM people WHERE id = 4",
    ],
    "accounts": [
        f"UPDATE accounts SET balance = -3 WHERE email = '{_email(3)}'",
        f"INSERT INTO accounts VALUES ('{_email(100)}', 1, 100)",
        f"DELETE FROM accounts WHERE email = '{_email(4)}'",
    ],
    "visits": [
        f"INSERT INTO visits VALUES (2, '{_email(2)}', 'visit 2')",
        f"UPDATE visits SET email = '{_email(501)}' WHERE c = 3 LIMIT 1",
        "DELETE FROM visits WHERE c = 4 LIMIT 1",
    ],
}


@contextlib.contextmanager
def general_log(mariadb: LocalMariaDB) -> Iterator[Callable[[], list[bytes]]]:
    """The server's general log on (into ``mysql.general_log``); yields a function giving
    every statement logged so far, as the server received it."""
    ((was_on, output),) = mariadb.query("SELECT @@global.general_log, @@global.log_output")
    mariadb.execute(
        "SET GLOBAL general_log = OFF",
        "SET GLOBAL log_output = 'TABLE'",
        "TRUNCATE TABLE mysql.general_log",
        "SET GLOBAL general_log = ON",
    )

    def statements() -> list[bytes]:
        rows = mariadb.query("SELECT argument FROM mysql.general_log")
        return [row[0] if isinstance(row[0], bytes) else str(row[0]).encode() for row in rows]

    try:
        yield statements
    finally:
        mariadb.execute("SET GLOBAL general_log = OFF", "TRUNCATE TABLE mysql.general_log")
        mariadb.query("SET GLOBAL log_output = %s", (output,))
        mariadb.query("SET GLOBAL general_log = %s", (int(was_on),))


def _spellings(secret: bytes) -> list[bytes]:
    """``secret`` as a statement could hold it: raw, hex either case, quoted by the driver."""
    quoted = pymysql.converters.escape_bytes(secret)
    return [
        secret,
        secret.hex().encode(),
        secret.hex().upper().encode(),
        quoted.encode("utf-8", "surrogateescape"),
    ]


class Pipeline:
    """The tables snapshotted and streamed into a lake, and verified as the task does."""

    def __init__(self, mariadb: LocalMariaDB, db: str, tmp_path: Path) -> None:
        self.mariadb, self.rules = mariadb, _rules(db)
        self.tables = _create(mariadb, db)
        self.meta, self.lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
        record = plan(mariadb, [str(t) for t in self.tables], CHUNK_ROWS, self.meta)
        assert len(record.chunks) > len(self.tables)  # tables of more than one chunk
        self.run_chunks(record.chunks)
        names = [str(t) for t in self.tables]
        spec = stream_spec(mariadb, names, self.meta, self.lake, tmp_path / "checkpoint")
        self.stream = InProcessStream(dataclasses.replace(spec, lake_columns=self.rules), tmp_path)

    def run_chunks(self, chunks: Sequence[Any]) -> None:
        for chunk in chunks:
            spec = job_spec(self.mariadb, chunk.chunk_id, self.meta, self.lake)
            run_chunk(dataclasses.replace(spec, lake_columns=self.rules))

    def verify(
        self, tables: Sequence[TableId], *, repair: bool = False, while_open: Sequence[str] = ()
    ) -> list[TableOutcome]:
        """verify of ``tables`` (the stream run until caught up whenever the check asks
        where it is; ``while_open``: statements made then, at the first ask)."""
        pending = list(while_open)

        def committed() -> Any:
            if pending:
                self.mariadb.execute(*pending, database=tables[0].database)
                pending.clear()
            self.stream.run_until_caught_up()
            state = self.stream.store.streams.state(self.stream.spec.stream_id)
            return None if state is None else state.committed_position

        source = source_config(self.mariadb)
        with MetadataStore.connect(self.meta) as store:
            epoch = store.servers.current(source, may_switch=False)
        conn = connect(source)
        try:
            info, schemas = server_info(conn, epoch), [load_table_schema(conn, t) for t in tables]
        finally:
            conn.close()
        settings = VerifySettings(range_rows=20, stream_wait_seconds=60)
        outcomes = verify_tables(
            source, info, self.sink, schemas, settings, committed, repair=repair,
            lake_columns=self.rules,
        )  # fmt: skip
        for outcome in outcomes:
            assert outcome.error is None, outcome.error
        return outcomes

    @property
    def sink(self) -> SinkConfig:
        return SinkConfig(str(self.lake))

    def differences(self, table: TableId) -> list[Any]:
        (outcome,) = self.verify([table])
        assert outcome.check is not None
        return sorted(outcome.check.differences.keys)

    def lake_hashes(self) -> set[str]:
        """Every hash under the key the lake holds."""
        sink = open_sink(self.sink)
        return {
            value
            for table in self.tables
            for value in sink.read_all(table).column("email").to_pylist()
            if value is not None
        }


def test_verify_sends_nothing_of_the_mask_key_to_the_source(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    with general_log(mariadb) as statements:
        pipeline = Pipeline(mariadb, fresh_db, tmp_path)
        people, accounts, visits = pipeline.tables
        try:
            _check(pipeline, people, accounts, visits)
        finally:
            pipeline.stream.close()
        logged = statements()
        hashes = pipeline.lake_hashes()

    inner, outer = hmac_pads(MaskKey(KEY.encode()))
    secrets = [s for secret in (KEY.encode(), inner, outer) for s in _spellings(secret)]
    secrets += [b"@cdc_mask", b"SHA2(", *(h.encode() for h in hashes)]
    assert len(hashes) > ROWS  # the tables share their emails: one hash each
    holding = [(s, statement[:120]) for statement in logged for s in secrets if s in statement]
    assert holding == [], "statements the source received hold the key or a hash under it"
    for table in pipeline.tables:  # the log saw verify read each table
        name = f"`{table.database}`.`{table.table}`".encode()
        assert any(name in s and b"MD5(" in s for s in logged), table


def _check(pipeline: Pipeline, people: TableId, accounts: TableId, visits: TableId) -> None:
    # 1. clean, while the stream applies changes after the views are open
    for table in pipeline.tables:
        (outcome,) = pipeline.verify([table], while_open=CHANGES[table.table])
        assert outcome.check is not None
        assert outcome.check.clean, outcome.check.differences.describe()
        assert outcome.check.passes == 1, table  # equal at once, not by listing rows later
        written = open_sink(pipeline.sink).read_all(table).column(POSITION_COLUMN)
        assert pc.max(written).as_py() > outcome.check.cut.encode(), "no row newer than the cut"

    # 2. differences planted outside the binlog
    pipeline.mariadb.execute(
        "SET SESSION sql_log_bin = 0",
        "UPDATE people SET email = 'planted@example.org' WHERE id = 7",
        "UPDATE people SET notes = 'note of 8, another tail' WHERE id = 8",  # beyond 10
        "UPDATE people SET notes = 'changed' WHERE id = 9",
        f"UPDATE accounts SET balance = -1 WHERE email = '{_email(20)}'",
        f"INSERT INTO accounts VALUES ('{_email(9000)}', 2, 9000)",
        f"DELETE FROM accounts WHERE email = '{_email(30)}'",
        f"UPDATE visits SET email = 'planted@example.org' WHERE email = '{_email(11)}' LIMIT 1",
        database=people.database,
    )
    assert pipeline.differences(people) == [(7,), (9,)]
    assert pipeline.differences(accounts) == sorted((_hashed(_email(n)),) for n in (20, 9000, 30))
    # rows 11 and 41 were one image (5, email 11, 'visit 11'): one of them changed
    old, new = (_hashed(_email(11)), "visit 11"), (_hashed("planted@example.org"), "visit 11")
    assert pipeline.differences(visits) == sorted([(5, *old), (5, *new)])

    # 3. repaired: the ranges re-snapshotted, the key only the lake has marked deleted
    outcomes = {o.table.table: o for o in pipeline.verify(pipeline.tables, repair=True)}
    assert (outcomes["accounts"].removed, len(outcomes["accounts"].repair)) == (1, 2)
    assert {name: o.status for name, o in outcomes.items()} == dict.fromkeys(CHANGES, "repairing")
    plans = [p for o in outcomes.values() for p in o.plans()]
    repair = MetadataStore.connect(pipeline.meta).plans.create("repair", plans)
    pipeline.run_chunks(repair.chunks)
    for table in pipeline.tables:
        assert pipeline.differences(table) == []
