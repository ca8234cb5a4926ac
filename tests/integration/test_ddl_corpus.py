"""The DDL corpus on a real MariaDB: every statement MariaDB takes runs in a database of its
own (``tests/support/ddl_corpus.py``'s setup first), and the binlog, read by the product's
own reader as the stream reads it, gives each the decision the corpus expects for ``t``:
the statements are real, and so is the form the server logs them in (``DROP TABLE`` gains
a comment, ``CREATE ... SELECT`` loses its ``SELECT``...)."""

from __future__ import annotations

from collections import defaultdict

import pymysql
import pytest

from airflow_cdc.model import BinlogPosition, Column, SchemaEvent, TableId, TableSchema
from airflow_cdc.source.binlog.reader import read_changes
from airflow_cdc.stream.schema_decisions import Coverage, statement_decision
from devtools.local_mariadb import LocalMariaDB
from tests.support.ddl_corpus import CORPUS, SETUPS
from tests.support.pipeline import server_position, source_config

pytestmark = pytest.mark.integration

ON_MARIADB = [ddl for ddl in CORPUS if ddl.mariadb]


def _database(n: int) -> str:
    return f"ddl_corpus_{n:03d}"


def test_each_statement_as_mariadb_logs_it_gets_its_decision(mariadb: LocalMariaDB) -> None:
    cfg = source_config(mariadb)
    conn = mariadb.root()
    spans: dict[str, tuple[BinlogPosition, BinlogPosition]] = {}
    refused: list[str] = []
    try:
        with conn.cursor() as cur:
            for n, ddl in enumerate(ON_MARIADB):
                db = _database(n)
                cur.execute(f"DROP DATABASE IF EXISTS {db}")
                cur.execute(f"CREATE DATABASE {db}")
                cur.execute(f"USE {db}")
                for statement in SETUPS[ddl.setup]:
                    cur.execute(statement)
                before = server_position(cfg)
                try:
                    cur.execute(ddl.sql.format(db=db))
                except pymysql.MySQLError as exc:
                    refused.append(f"{ddl.source}: {ddl.sql!r}: {exc}")
                spans[db] = (before, server_position(cfg))
    finally:
        conn.close()
    assert not refused, "\n".join(refused)

    dummy = (Column("id", "int", "int(11)", False),)
    schemas = {TableId(db, "t"): TableSchema(TableId(db, "t"), dummy, ("id",)) for db in spans}
    start = min(span[0] for span in spans.values())
    end = max(span[1] for span in spans.values())
    statements: dict[str, dict[BinlogPosition, list[SchemaEvent]]] = defaultdict(dict)
    for item in read_changes(cfg, schemas, start, end):
        if isinstance(item, SchemaEvent):
            statements[item.table.database].setdefault(item.position, []).append(item)

    wrong = []
    for n, ddl in enumerate(ON_MARIADB):
        db = _database(n)
        before, after = spans[db]
        found = {p: e for p, e in statements.get(db, {}).items() if before < p <= after}
        decisions = [
            statement_decision([e.change for e in events], Coverage.AFTER).value
            for events in found.values()
        ]
        expected = [] if ddl.decision is None or not ddl.logged else [ddl.decision]
        if decisions != expected:
            logged = [events[0].statement for events in found.values()]
            wrong.append(f"{ddl.source}: {ddl.sql!r}: {decisions} != {expected}; logged {logged}")
    assert not wrong, "\n".join(wrong)
    with mariadb.root() as drop, drop.cursor() as cur:
        for db in spans:
            cur.execute(f"DROP DATABASE IF EXISTS {db}")
