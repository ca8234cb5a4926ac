"""A masked key column keeps the row's identity (issue 49): ``accounts`` keyed by ``email``,
hashed, with ``ssn`` left out and ``notes`` truncated, against real MariaDB, Delta and
SQLite metadata; the chunks in-process, the stream job's reader and batch function
in-process (``tests/support/stream_harness.py``).

1. Snapshot, with a chunk's correction window holding an update, a delete and a key's
   change (the window's deleted keys meet the staged rows as hashes).
2. Stream: inserts, updates, deletes, a key changed, an email given to another row.
3. A chunk re-run under a lagging batch (``test_chunk_rerun_under_lagging_stream``'s case,
   which a table with a plain key survives by sweeping the chunk's range): the batch
   holds an insert, the re-run reads the range after the key's delete, the delete lies
   before the re-run's high watermark. A table keyed by hash has no range to sweep in the
   lake; every change of it is emitted, so the delete still removes the row.
4. Verify compares it clean; differences planted outside the binlog (a row changed, one
   added, one removed) are found by their hashed keys and repaired: the rows the source
   has by ranges of their source keys, the key only the lake has by a delete marker.

The oracle is the source's rows with the rules applied by Python's own ``hmac`` and
slicing; no raw ``email`` or ``ssn`` is in any byte under the lake or in the jobs' log
records (a chunk is logged by its number: its bounds are source keys)."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from airflow_cdc.config import LakeColumnsConfig, SinkConfig, VerifySettings
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import TableId
from airflow_cdc.sinks.contract.formats import open_sink
from airflow_cdc.snapshot.unit import run_chunk
from airflow_cdc.source.catalog import load_table_schema
from airflow_cdc.source.connection import connect
from airflow_cdc.source.server import server_info
from airflow_cdc.verify.run import verify_tables
from devtools.local_mariadb import LocalMariaDB
from tests.support.pipeline import (
    arm,
    job_spec,
    plan,
    run_chunk_pausing,
    source_config,
    source_rows,
    stream_spec,
    verify_differences,
    wait_for,
)
from tests.support.secrets import values_in_files
from tests.support.stream_harness import InProcessStream

pytestmark = pytest.mark.integration

ROWS, CHUNK_ROWS = 90, 30
KEY = "mask-key-of-the-hashed-keys-test"


def _email(n: int) -> str:
    return f"holder{n:04d}@example.org"


def _ssn(n: int) -> str:
    return f"SSN-{n:07d}"


def _hashed(value: str) -> str:
    return hmac.new(KEY.encode(), value.encode(), hashlib.sha256).hexdigest()


def _rules(db: str) -> LakeColumnsConfig:
    return LakeColumnsConfig(
        columns={f"{db}.accounts": {"exclude": ["ssn"]}},
        masks={f"{db}.accounts.email": "hash", f"{db}.accounts.notes": "truncate:10"},
        mask_key=KEY,
    )


def _expected(mariadb: LocalMariaDB, table: TableId) -> dict[str, dict[str, Any]]:
    """The source's rows as the lake holds them, by hashed key (the oracle)."""
    expected = {}
    for row in source_rows(mariadb, f"SELECT * FROM {table.quoted()}", "email").values():
        row.pop("ssn")
        row["email"] = _hashed(row["email"])
        row["notes"] = None if row["notes"] is None else row["notes"][:10]
        expected[row["email"]] = row
    return expected


def _lake(lake: Path, table: TableId) -> dict[str, dict[str, Any]]:
    rows = open_sink(SinkConfig(str(lake))).read_live(table).to_pylist()
    assert len({row["email"] for row in rows}) == len(rows), "one live row per hashed key"
    return {row["email"]: row for row in rows}


def _accounts(mariadb: LocalMariaDB, db: str) -> TableId:
    table = TableId(db, "accounts")
    t = table.quoted()
    mariadb.execute(
        # A binary collation: the emit filter can place its keys (it emits every change of
        # a key it cannot place, hashed or not)
        f"CREATE TABLE {t} (email VARCHAR(100) COLLATE utf8mb4_bin NOT NULL PRIMARY KEY, "
        "ssn CHAR(11), "
        "balance INT NOT NULL, notes TEXT)",
        f"INSERT INTO {t} VALUES "
        + ", ".join(
            f"('{_email(n)}', '{_ssn(n)}', {n}, 'notes of {n}, long')" for n in range(1, ROWS + 1)
        ),
    )
    return table


def _changes(cur: Any, t: str, base: int, row: int) -> list[str]:
    """Four inserts (``base`` on), an update of row ``row``, a delete of the next and a
    key's change of the one after; the raw values written."""
    cur.executemany(
        f"INSERT INTO {t} VALUES (%s, %s, %s, %s)",
        [(_email(base + n), _ssn(base + n), n, f"new notes of {base + n}") for n in range(4)],
    )
    cur.execute(
        f"UPDATE {t} SET balance = balance + 100, ssn = %s WHERE email = %s",
        (_ssn(base + 10), _email(row)),
    )
    cur.execute(f"DELETE FROM {t} WHERE email = %s", (_email(row + 1),))
    cur.execute(f"UPDATE {t} SET email = %s WHERE email = %s", (_email(base + 20), _email(row + 2)))
    return [_email(base + n) for n in (0, 1, 2, 3, 20)] + [_ssn(base + 10)]


def _snapshot(
    mariadb: LocalMariaDB,
    meta: str,
    lake: Path,
    rules: LakeColumnsConfig,
    table: TableId,
    pause: Path,
) -> tuple[list[str], Any]:
    """Every chunk of a full plan; the first paused after its read while its window's
    changes (of its keys) are written. The raw values those changes wrote, and the first
    chunk."""
    record = plan(mariadb, [str(table)], CHUNK_ROWS, meta)
    assert len(record.chunks) >= 2

    def spec(chunk_id: int) -> Any:
        return dataclasses.replace(
            job_spec(mariadb, chunk_id, meta, lake),
            lake_columns=rules,
        )

    first = min(record.chunks, key=lambda c: c.range.lo or ())
    writer = mariadb.root()
    try:
        arm(pause, "after_read")
        with ThreadPoolExecutor(1) as pool, writer.cursor() as cur:
            job = pool.submit(run_chunk_pausing, spec(first.chunk_id), pause)
            wait_for(pause / "after_read.reached")
            written = _changes(cur, table.quoted(), 100, 2)
            (pause / "after_read.pause").unlink()
            (pause / "after_read.release").touch()
            outcome = job.result(timeout=120)
    finally:
        writer.close()
    assert outcome.window_events >= 3
    for chunk in record.chunks:
        if chunk.chunk_id != first.chunk_id:
            run_chunk(spec(chunk.chunk_id))
    return written, first


def test_a_hashed_key_keeps_each_row_s_identity(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="airflow_cdc")
    table = _accounts(mariadb, fresh_db)
    t = table.quoted()
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    rules = _rules(fresh_db)
    pause = tmp_path / "pause"
    pause.mkdir()
    raw = [_email(n) for n in range(1, ROWS + 1)] + [_ssn(n) for n in range(1, ROWS + 1)]
    written, first = _snapshot(mariadb, meta, lake, rules, table, pause)
    raw += written
    assert _lake(lake, table) == _expected(mariadb, table)

    spec = dataclasses.replace(
        stream_spec(mariadb, [str(table)], meta, lake, tmp_path / "ckpt"),
        lake_columns=rules,
    )
    stream = InProcessStream(spec, tmp_path, pause_dir=pause)
    writer = mariadb.root()
    try:
        with writer.cursor() as cur:
            raw += _changes(cur, t, 200, 40)
            # an email freed and given to another row
            cur.execute(f"DELETE FROM {t} WHERE email = %s", (_email(7),))
            cur.execute(f"UPDATE {t} SET email = %s WHERE email = %s", (_email(7), _email(8)))
            stream.run_until_caught_up()
        assert _lake(lake, table) == _expected(mariadb, table)

        # 3. a chunk re-run under a lagging batch: the key inserted, read, then deleted
        lagging_key = _email(1)[:-4] + "zz.org"  # in the first chunk's range
        mariadb.execute(f"INSERT INTO {t} VALUES ('{lagging_key}', 'SSN-LAGGING', 1, 'x')")
        raw += [lagging_key, "SSN-LAGGING"]
        lagging = stream.read_batch()  # planned with the chunk's first high watermark
        mariadb.execute(f"DELETE FROM {t} WHERE email = '{lagging_key}'")
        applying = threading.Thread(target=stream.apply_read_batch, args=(lagging,))
        arm(pause, "stream_before_apply")
        applying.start()
        wait_for(pause / "stream_before_apply.reached", timeout=120)
        (pause / "stream_before_apply.pause").unlink()
        rerun = run_chunk(
            dataclasses.replace(job_spec(mariadb, first.chunk_id, meta, lake), lake_columns=rules)
        )
        assert (rerun.attempt, rerun.as_files) == (2, False)
        (pause / "stream_before_apply.release").touch()
        applying.join(120)
        assert not applying.is_alive()
        stream.run_until_caught_up()  # the delete: before the re-run's high watermark
        assert _hashed(lagging_key) not in _lake(lake, table)
        assert _lake(lake, table) == _expected(mariadb, table)
    finally:
        writer.close()
        for armed in pause.glob("*.pause"):
            (pause / armed.name.replace(".pause", ".release")).touch()
        stream.close()
    assert values_in_files(lake, raw) == []

    # 4. verify: clean, then planted differences found by hashed key and repaired
    sink = SinkConfig(str(lake))
    assert verify_differences(mariadb, table, meta, sink, rules) == []
    mariadb.execute(
        "SET SESSION sql_log_bin = 0",
        f"UPDATE {t} SET balance = -1 WHERE email = '{_email(20)}'",
        f"INSERT INTO {t} VALUES ('{_email(9000)}', 'SSN-9000', 9000, 'planted')",
        f"DELETE FROM {t} WHERE email = '{_email(30)}'",
    )
    planted = sorted((_hashed(_email(n)),) for n in (20, 9000, 30))
    assert verify_differences(mariadb, table, meta, sink, rules) == planted
    outcome = _verify_with_repair(mariadb, table, meta, sink, rules)
    assert (outcome.status, outcome.removed, len(outcome.repair)) == ("repairing", 1, 2)
    repair = MetadataStore.connect(meta).plans.create("repair", outcome.plans())
    for chunk in repair.chunks:
        run_chunk(
            dataclasses.replace(job_spec(mariadb, chunk.chunk_id, meta, lake), lake_columns=rules)
        )
    assert verify_differences(mariadb, table, meta, sink, rules) == []
    assert _lake(lake, table) == _expected(mariadb, table)
    assert values_in_files(lake, [*raw, _email(9000), "SSN-9000"]) == []
    # the chunks' labels in the logs name them by number: their bounds are source keys
    assert "accounts #0" in caplog.text
    assert [value for value in raw if value in caplog.text] == []


def _verify_with_repair(
    mariadb: LocalMariaDB, table: TableId, meta: str, sink: SinkConfig, rules: LakeColumnsConfig
) -> Any:
    with MetadataStore.connect(meta) as store:
        epoch = store.servers.current(source_config(mariadb), may_switch=False)
    conn = connect(source_config(mariadb))
    try:
        info, schema = server_info(conn, epoch), load_table_schema(conn, table)
    finally:
        conn.close()
    (outcome,) = verify_tables(
        source_config(mariadb),
        info,
        sink,
        [schema],
        VerifySettings(),
        lambda: None,
        repair=True,
        lake_columns=rules,
    )
    return outcome


def test_a_key_column_takes_no_mask_but_hash(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """``truncate`` or ``null`` of a key column would make rows one: refused, naming the
    entry, before a row is read."""
    from airflow_cdc.errors import ConfigurationError

    table = _accounts(mariadb, fresh_db)
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    record = plan(mariadb, [str(table)], 1_000, meta)
    rules = LakeColumnsConfig(masks={f"{fresh_db}.accounts.email": "truncate:5"})
    spec = dataclasses.replace(
        job_spec(mariadb, record.chunks[0].chunk_id, meta, lake), lake_columns=rules
    )
    with pytest.raises(ConfigurationError, match=r"accounts\.email: a key column takes 'hash'"):
        run_chunk(spec)
    assert not (lake / fresh_db / "accounts").exists()


def test_routed_shards_keep_their_rows_apart_by_source_and_hashed_key(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """Two shards with the same emails routed into one table, the key hashed: the table's
    key is the source table and the hashed email. Snapshot, stream (the same email changed
    in one shard, deleted in the other), each shard's verify clean, then a row removed
    from one shard outside the binlog found in that shard alone and repaired by a delete
    marker of that shard's row."""
    db = fresh_db
    shards = [TableId(db, f"accounts_{n:02d}") for n in range(2)]
    for shard in shards:
        _accounts(mariadb, db)
        mariadb.execute(f"RENAME TABLE {db}.accounts TO {shard.quoted()}")
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    routed = SinkConfig(str(lake), routes={f"{db}.accounts_*": f"{db}.accounts"})
    rules = LakeColumnsConfig(masks={f"{db}.accounts_*.email": "hash"}, mask_key=KEY)
    for chunk in plan(mariadb, [str(s) for s in shards], CHUNK_ROWS, meta).chunks:
        spec = job_spec(mariadb, chunk.chunk_id, meta, lake)
        run_chunk(dataclasses.replace(spec, sink=routed, lake_columns=rules))
    spec = stream_spec(mariadb, [str(s) for s in shards], meta, lake, tmp_path / "ckpt")
    stream = InProcessStream(dataclasses.replace(spec, sink=routed, lake_columns=rules), tmp_path)
    try:
        mariadb.execute(
            f"UPDATE {shards[0].quoted()} SET balance = -5 WHERE email = '{_email(10)}'",
            f"DELETE FROM {shards[1].quoted()} WHERE email = '{_email(10)}'",
            f"INSERT INTO {shards[1].quoted()} VALUES ('{_email(500)}', 'S', 1, 'n')",
        )
        stream.run_until_caught_up()
    finally:
        stream.close()

    def union() -> dict[tuple[str, str], tuple[int, str | None]]:
        rows = {}
        for shard in shards:
            sql = f"SELECT * FROM {shard.quoted()}"
            for email, row in source_rows(mariadb, sql, "email").items():
                rows[(str(shard), _hashed(email))] = (row["balance"], row["notes"])
        return rows

    def merged() -> dict[tuple[str, str], tuple[int, str | None]]:
        held = DeltaTable(str(lake / db / "accounts")).to_pyarrow_table().to_pylist()
        rows = [r for r in held if not r["_cdc_deleted"]]
        found = {(r["_cdc_source_table"], r["email"]): (r["balance"], r["notes"]) for r in rows}
        assert len(found) == len(rows)
        return found

    assert merged() == union()
    assert merged()[(str(shards[0]), _hashed(_email(10)))][0] == -5
    for shard in shards:
        assert verify_differences(mariadb, shard, meta, routed, rules) == []
    mariadb.execute(
        "SET SESSION sql_log_bin = 0",
        f"DELETE FROM {shards[0].quoted()} WHERE email = '{_email(11)}'",
    )
    assert verify_differences(mariadb, shards[1], meta, routed, rules) == []
    assert verify_differences(mariadb, shards[0], meta, routed, rules) == [(_hashed(_email(11)),)]
    outcome = _verify_with_repair(mariadb, shards[0], meta, routed, rules)
    assert (outcome.removed, outcome.repair) == (1, ())
    assert merged() == union()
    assert (str(shards[1]), _hashed(_email(11))) in merged()
