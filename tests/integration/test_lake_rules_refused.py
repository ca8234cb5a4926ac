"""A ``columns`` or ``masks`` entry that matches nothing the run follows is refused by the
plan operator before any row is read or written, naming the entry and the way on; one that
names a column in another case is applied to it. Real MariaDB (its general log shows which
statements the CDC user sent), a SQLite metadata DB, a local Delta lake; the accepted
rules' chunks run in-process.

The issue's reproductions, on ``people (id, name, email, ssn, notes)``: ``masks
{"<db>.*.Email": "hash"}`` and ``{"<db>.people.Email": "hash"}`` hash ``email``;
``columns {"<db>.people": {"exclude": ["sssn"]}}``, ``{"<db>.*": {"exclude": ["sssn"]}}``
and ``masks {"<db>.peple.email": "hash"}`` are refused."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from airflow_cdc.errors import ConfigurationError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import TableId
from airflow_cdc.model.column_names import same_column_name
from airflow_cdc.operators.plan import PlanSnapshotOperator
from airflow_cdc.sinks.contract.formats import open_sink
from airflow_cdc.snapshot.unit import run_chunk
from devtools.local_mariadb import LocalMariaDB
from tests.support.pipeline import job_spec
from tests.support.secrets import values_in_files
from tests.support.task_instance import RecordingTI
from tests.unit.test_model_column_names import ONE_NAME, TWO_NAMES

pytestmark = pytest.mark.integration

KEY = "mask-key-of-the-rules-test"
ROWS = 20


@pytest.fixture
def people(mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path, monkeypatch: Any) -> str:
    """``people`` and ``orders`` in ``fresh_db``; the task's connections."""
    monkeypatch.setenv("AIRFLOW_CONN_CDC_SOURCE", mariadb.url())
    monkeypatch.setenv("AIRFLOW_CONN_CDC_METADATA", f"sqlite:///{tmp_path}/meta.db")
    monkeypatch.setenv("AIRFLOW_CONN_CDC_MASK", f"generic://:{KEY}@")
    mariadb.execute(
        "CREATE TABLE people (id INT PRIMARY KEY, name VARCHAR(40), email VARCHAR(60), "
        "ssn CHAR(11), notes TEXT)",
        *[
            f"INSERT INTO people VALUES ({n}, 'name {n}', '{_email(n)}', 'SSN-{n:07d}', 'n')"
            for n in range(1, ROWS + 1)
        ],
        "CREATE TABLE orders (id INT PRIMARY KEY, total INT)",
        "INSERT INTO orders VALUES (1, 10), (2, 20)",
        database=fresh_db,
    )
    return fresh_db


def _email(n: int) -> str:
    return f"person{n:03d}@example.org"


@pytest.fixture
def general_log(mariadb: LocalMariaDB) -> Iterator[None]:
    """The server's general log on, to a table, while the test runs (off and emptied
    after): :func:`_sent` reads what the CDC user sent."""
    mariadb.execute(
        "SET GLOBAL log_output = 'TABLE'",
        "TRUNCATE mysql.general_log",
        "SET GLOBAL general_log = 1",
    )
    try:
        yield
    finally:
        mariadb.execute("SET GLOBAL general_log = 0", "TRUNCATE mysql.general_log")


def _sent(mariadb: LocalMariaDB) -> list[str]:
    rows = mariadb.query(
        "SELECT CONVERT(argument USING utf8mb4) FROM mysql.general_log "
        "WHERE command_type = 'Query' AND user_host LIKE 'cdc%%'"
    )
    return [str(row[0]) for row in rows]


def _plan(db: str, lake: Path, **kwargs: Any) -> list[dict[str, Any]]:
    args: dict[str, Any] = {"tables": [f"{db}.*"], "chunking": {"chunk_rows": 10}}
    op = PlanSnapshotOperator(task_id="plan", sink_path=str(lake), **{**args, **kwargs})
    return op.execute({"run_id": "manual__rules", "ti": RecordingTI()})  # type: ignore[arg-type]


REFUSED = [
    pytest.param(
        {"columns": {"{db}.people": {"exclude": ["sssn"]}}},
        "the 'columns' entry '{db}.people' names 'sssn', which {db}.people lacks (did you "
        "mean 'ssn'?): correct the column name (compared without case) or drop it",
        id="exclude-typo-exact-table",
    ),
    pytest.param(
        {"columns": {"{db}.*": {"exclude": ["sssn"]}}},
        "the 'columns' entry '{db}.*' names 'sssn', which none of the 2 tables it matches "
        "has ({db}.orders, {db}.people) (did you mean 'ssn'?): correct the column name",
        id="exclude-typo-pattern",
    ),
    pytest.param(
        {"masks": {"{db}.peple.email": "hash"}},
        "the 'masks' entry '{db}.peple.email' matches none of the 2 table(s) this run follows "
        "(did you mean '{db}.people'?): correct its table pattern (names as the server spells "
        "them; with routes, the source tables) or drop the entry",
        id="mask-table-typo",
    ),
    pytest.param(
        {"masks": {"{db}.peple.email": "hash"}, "startup": {"mode": "latest"}},
        "the 'masks' entry '{db}.peple.email' matches none of the 2 table(s)",
        id="mask-table-typo-no-snapshot",
    ),
    pytest.param(
        {"tables": ["{db}.orders"], "masks": {"{db}.people.email": "hash"}},
        "the 'masks' entry '{db}.people.email' matches none of the 1 table(s) this run follows",
        id="mask-of-a-table-the-run-does-not-follow",
    ),
    pytest.param(
        {
            "tables": ["{db}.orders"],
            "allowed_tables": ["{db}.*"],
            "masks": {"{db}.people.emial": "hash"},
        },
        "the 'masks' entry '{db}.people.emial' names 'emial', which {db}.people lacks",
        id="backfill-judged-against-the-configured-set",
    ),
]


def _filled(value: Any, db: str) -> Any:
    if isinstance(value, str):
        return value.replace("{db}", db)
    if isinstance(value, list):
        return [_filled(v, db) for v in value]
    if isinstance(value, dict):
        return {_filled(k, db): _filled(v, db) for k, v in value.items()}
    return value


@pytest.mark.parametrize(("given", "message"), REFUSED)
def test_an_entry_matching_nothing_is_refused_before_a_row_is_read_or_written(
    mariadb: LocalMariaDB,
    people: str,
    tmp_path: Path,
    general_log: None,
    given: dict[str, Any],
    message: str,
) -> None:
    lake = tmp_path / "lake"
    with pytest.raises(ConfigurationError) as refused:
        _plan(people, lake, **_filled(given, people))
    assert _filled(message, people) in str(refused.value)
    assert "(the 'columns' and 'masks' settings)" in str(refused.value)
    sent = _sent(mariadb)
    assert sent, "the general log holds none of the task's statements"
    read = [s for s in sent if f"`{people}`.`people`" in s or f"`{people}`.`orders`" in s]
    assert read == [], "a statement read a followed table before the rules were checked"
    assert [p for p in lake.rglob("*") if p.is_file()] == [], "something reached the lake"
    with MetadataStore.connect(f"sqlite:///{tmp_path}/meta.db") as store:
        assert store.plans.latest() is None, "a plan was recorded"


@pytest.mark.parametrize("entry", ["{db}.*.Email", "{db}.people.Email", "{db}.people.EMAIL"])
def test_a_mask_naming_a_column_in_another_case_is_applied_to_it(
    mariadb: LocalMariaDB, people: str, tmp_path: Path, general_log: None, entry: str
) -> None:
    lake, meta = tmp_path / "lake", f"sqlite:///{tmp_path}/meta.db"
    masks = {_filled(entry, people): "hash"}
    handles = _plan(people, lake, tables=[f"{people}.people"], masks=masks)
    assert any(f"`{people}`.`people`" in s for s in _sent(mariadb)), "the plan read no key"
    op = PlanSnapshotOperator(task_id="p", tables=[f"{people}.people"], sink_path=str(lake))
    op.masks = masks
    rules = op.lake_columns()
    for chunk_id in (i for handle in handles for i in handle["chunk_ids"]):
        run_chunk(dataclasses.replace(job_spec(mariadb, chunk_id, meta, lake), lake_columns=rules))
    rows = open_sink(job_spec(mariadb, 0, meta, lake).sink).read_live(TableId(people, "people"))
    emails = {row["id"]: row["email"] for row in rows.to_pylist()}
    assert emails == {
        n: hmac.new(KEY.encode(), _email(n).encode(), hashlib.sha256).hexdigest()
        for n in range(1, ROWS + 1)
    }
    assert values_in_files(lake, [_email(n) for n in range(1, ROWS + 1)]) == []


def test_column_names_are_one_exactly_where_the_server_says(
    mariadb: LocalMariaDB, fresh_db: str
) -> None:
    """Each pair of ``model.column_names``' examples made as two columns of one table: the
    server refuses them as duplicates exactly when the rule holds them to be one name."""
    answers = {}
    for n, (a, b) in enumerate([*ONE_NAME, *TWO_NAMES]):
        try:
            mariadb.execute(f"CREATE TABLE t{n} (`{a}` INT, `{b}` INT)", database=fresh_db)
            answers[a, b] = "two"
        except pymysql.err.OperationalError as exc:
            answers[a, b] = "one" if exc.args[0] == 1060 else str(exc)  # duplicate column
    assert answers == {(a, b): "one" if same_column_name(a, b) else "two" for a, b in answers}
