"""The online schema change tools as real MySQL shops run them, against a test server:
Debian's pt-online-schema-change, and gh-ost's cut-over reproduced statement for statement
(gh-ost is packaged neither by Debian nor by PyPI).

gh-ost, as its documentation and code describe it: a changelog table ``_t_ghc``, a shadow
``_t_gho`` created ``LIKE`` the table and altered, filled by ``INSERT IGNORE ... SELECT``
chunks while the table's row events are read from the binlog and applied to the shadow,
then the atomic cut-over: the shadow caught up to the binlog while no write reaches the
table (gh-ost holds a lock; here the writer is paused for it), then ``RENAME TABLE t TO
_t_del, _t_gho TO t`` in one statement, and the old table and the changelog dropped.
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from devtools.local_mariadb import LocalMariaDB
from tests.support.table_writer import TableWriter

__all__ = ["gh_ost", "pt_online_schema_change"]


def pt_online_schema_change(
    server: LocalMariaDB, db: str, table: str, alter: str, workdir: Path
) -> str:
    """Run Debian's pt-online-schema-change (the root login in a defaults file, not the
    command line); its output."""
    defaults = workdir / "pt-osc.cnf"
    defaults.write_text(f"[client]\nuser=root\npassword={server.root_password}\n")
    defaults.chmod(0o600)
    done = subprocess.run(
        [
            "pt-online-schema-change",
            "--alter",
            alter,
            f"F={defaults},S={server.socket_path},D={db},t={table}",
            "--execute",
            "--recursion-method",
            "none",
            "--chunk-size",
            "500",
            "--no-check-unique-key-change",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def gh_ost(
    server: LocalMariaDB, db: str, table: str, alter: str, writer: TableWriter, chunk: int = 500
) -> None:
    """gh-ost's migration of ``db.table`` by ``alter`` while ``writer`` writes it (see the
    module docstring)."""
    q = f"`{db}`"
    server.execute(
        f"create /* gh-ost */ table {q}.`_{table}_ghc` (id bigint auto_increment, "
        "last_update timestamp not null DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, "
        "hint varchar(64) charset ascii not null, value varchar(4096) charset ascii not null, "
        "primary key(id), unique key hint_uidx(hint)) auto_increment=256",
        f"create /* gh-ost */ table {q}.`_{table}_gho` like {q}.`{table}`",
        f"alter /* gh-ost */ table {q}.`_{table}_gho` {alter}",
    )
    file, position = server.query("SHOW MASTER STATUS")[0][:2]
    replayer = _Replayer(server, db, table, str(file), int(position)).start()
    try:
        columns = [r[0] for r in server.query(f"SHOW COLUMNS FROM {q}.`{table}`")]
        names = ", ".join(f"`{c}`" for c in columns)
        (top,) = server.query(f"SELECT COALESCE(MAX(id), 0) FROM {q}.`{table}`")[0]
        for low in range(0, int(top) + 1, chunk):
            server.execute(
                f"insert /* gh-ost */ ignore into {q}.`_{table}_gho` ({names}) select {names} "
                f"from {q}.`{table}` force index (`PRIMARY`) where id >= {low} and id < "
                f"{low + chunk} lock in share mode"
            )
        writer.pause(table)  # gh-ost's lock: no write reaches the table from here
        replayer.catch_up()
        server.execute(
            f"rename /* gh-ost */ table {q}.`{table}` to {q}.`_{table}_del`, "
            f"{q}.`_{table}_gho` to {q}.`{table}`"
        )
    finally:
        replayer.stop()
    writer.tables.append(table)
    server.execute(
        f"drop /* gh-ost */ table if exists {q}.`_{table}_del`",
        f"drop /* gh-ost */ table if exists {q}.`_{table}_ghc`",
    )


class _Replayer:
    """The table's row events from the binlog applied to its shadow, as gh-ost does."""

    def __init__(self, server: LocalMariaDB, db: str, table: str, file: str, position: int):
        self.server, self.db, self.table = server, db, table
        self.reader = BinLogStreamReader(
            connection_settings={
                "host": "127.0.0.1",
                "port": server.port,
                "user": "root",
                "passwd": server.root_password,
            },
            server_id=4_000_001,
            log_file=file,
            log_pos=position,
            resume_stream=True,
            blocking=True,
            only_schemas=[db],
            only_tables=[table, f"_{table}_ghc"],
            only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        )
        #: The changelog's hints the replay has read (gh-ost's "all events up to the lock").
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gh-ost-replay", daemon=True)
        self.error: BaseException | None = None

    def start(self) -> _Replayer:
        self._thread.start()
        return self

    def catch_up(self, timeout: float = 120) -> None:
        """gh-ost's wait: a hint written to the changelog, read back from the binlog, says
        every event before it was applied."""
        hint = f"AllEventsUpToLockProcessed:{time.monotonic_ns()}"
        self.server.execute(
            f"insert /* gh-ost */ into `{self.db}`.`_{self.table}_ghc` (hint, value) "
            f"values ('{hint}', '') on duplicate key update value = values(value)"
        )
        deadline = time.monotonic() + timeout
        while hint not in self.seen:
            assert self.error is None, self.error
            assert time.monotonic() < deadline, "the replay did not catch up"
            time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        self.reader.close()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        conn = self.server.root(self.db)
        shadow = f"`_{self.table}_gho`"
        try:
            for event in self.reader:
                if self._stop.is_set():
                    return
                if event.table != self.table:  # the changelog
                    self.seen.update(
                        str(r.get("values", r.get("after_values", {})).get("hint"))
                        for r in event.rows
                    )
                    continue
                with conn.cursor() as cur:
                    for row in event.rows:
                        if isinstance(event, DeleteRowsEvent):
                            cur.execute(
                                f"DELETE FROM {shadow} WHERE id = %s", (row["values"]["id"],)
                            )
                            continue
                        values = (
                            row["after_values"]
                            if isinstance(event, UpdateRowsEvent)
                            else row["values"]
                        )
                        if (
                            isinstance(event, UpdateRowsEvent)
                            and row["before_values"]["id"] != values["id"]
                        ):
                            cur.execute(
                                f"DELETE FROM {shadow} WHERE id = %s", (row["before_values"]["id"],)
                            )
                        names = ", ".join(f"`{c}`" for c in values)
                        marks = ", ".join(["%s"] * len(values))
                        cur.execute(
                            f"REPLACE INTO {shadow} ({names}) VALUES ({marks})",
                            tuple(values.values()),
                        )
        except BaseException as exc:
            if not self._stop.is_set():
                self.error = exc
        finally:
            conn.close()
