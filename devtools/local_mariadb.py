"""A throw-away MariaDB server in a folder, with the binlog set up for CDC.

Used by the demo and the tests. It runs Debian's ``mariadbd`` on a free loopback port with
``binlog_format=ROW``, ``binlog_row_image=FULL`` and ``binlog_row_metadata=FULL``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

__all__ = ["LocalMariaDB", "free_port", "install_data_dir"]

CDC_USER = "cdc"
CDC_GRANTS = "SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, BINLOG MONITOR"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LocalMariaDB:
    """One server. ``start()`` creates the data folder on first use; ``stop()`` shuts it down."""

    base_dir: Path
    port: int = field(default_factory=free_port)
    root_password: str = "root-secret"
    cdc_password: str = "cdc-secret"
    extra_args: tuple[str, ...] = ()
    #: A data folder that :func:`install_data_dir` made: a fresh start copies it instead of
    #: running ``mariadb-install-db`` (~6 s, mostly waiting on the disk; the copy ~1 s).
    installed: Path | None = None
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def socket_path(self) -> Path:
        return self.base_dir / "mysqld.sock"

    @property
    def log_path(self) -> Path:
        return self.base_dir / "mysqld.log"

    def server_args(self) -> list[str]:
        return [
            "--no-defaults",
            f"--datadir={self.data_dir}",
            f"--socket={self.socket_path}",
            f"--port={self.port}",
            "--bind-address=127.0.0.1",
            f"--pid-file={self.base_dir / 'mysqld.pid'}",
            f"--log-error={self.log_path}",
            f"--log-bin={self.base_dir / 'binlog' / 'mysql-bin'}",
            "--server-id=1",
            "--binlog-format=ROW",
            "--binlog-row-image=FULL",
            "--binlog-row-metadata=FULL",
            "--skip-name-resolve",
            "--innodb-buffer-pool-size=512M",
            "--innodb-log-file-size=256M",
            "--innodb-flush-log-at-trx-commit=2",
            "--sync-binlog=0",
            "--max-connections=500",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_general_ci",
            "--default-time-zone=+00:00",
            "--user=root",
            *self.extra_args,
        ]

    def _install(self) -> None:
        (self.base_dir / "binlog").mkdir(parents=True, exist_ok=True)
        if self.installed is not None:
            shutil.copytree(self.installed, self.data_dir)
        else:
            install_data_dir(self.data_dir)

    def start(self, timeout: float = 60.0) -> LocalMariaDB:
        if self._process is not None and self._process.poll() is None:
            return self  # already running (``with LocalMariaDB(...).start()`` starts once)
        fresh = not (self.data_dir / "mysql").exists()
        if fresh:
            self._install()
        binary = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
        self._process = subprocess.Popen(
            [binary, *self.server_args()],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while True:
            if self._process.poll() is not None:
                log = (
                    self.log_path.read_text(errors="replace")[-3000:]
                    if self.log_path.exists()
                    else ""
                )
                raise RuntimeError(f"mariadbd exited with {self._process.returncode}:\n{log}")
            try:
                conn = self._connect_socket()
                conn.close()
                break
            except pymysql.err.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        if fresh:
            self._bootstrap_users()
        return self

    def _connect_socket(self) -> pymysql.connections.Connection[Any]:
        try:
            return pymysql.connect(
                unix_socket=str(self.socket_path), user="root", password=self.root_password
            )
        except pymysql.err.OperationalError:
            # Right after install root has no password yet.
            return pymysql.connect(unix_socket=str(self.socket_path), user="root")

    def _bootstrap_users(self) -> None:
        conn = self._connect_socket()
        with conn.cursor() as cur:
            cur.execute("ALTER USER 'root'@'localhost' IDENTIFIED BY %s", (self.root_password,))
            cur.execute(
                "CREATE OR REPLACE USER 'root'@'127.0.0.1' IDENTIFIED BY %s", (self.root_password,)
            )
            cur.execute("GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION")
            cur.execute(
                f"CREATE USER IF NOT EXISTS '{CDC_USER}'@'%%' IDENTIFIED BY %s",
                (self.cdc_password,),
            )
            cur.execute(f"GRANT {CDC_GRANTS} ON *.* TO '{CDC_USER}'@'%'")
        conn.commit()
        conn.close()

    def stop(self, kill: bool = False) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    def root(
        self, database: str | None = None, **kwargs: Any
    ) -> pymysql.connections.Connection[Any]:
        """A root connection over TCP (autocommit)."""
        return pymysql.connect(
            host="127.0.0.1",
            port=self.port,
            user="root",
            password=self.root_password,
            database=database,
            autocommit=True,
            **kwargs,
        )

    def execute(self, *statements: str, database: str | None = None) -> None:
        conn = self.root(database)
        try:
            with conn.cursor() as cur:
                for statement in statements:
                    cur.execute(statement)
        finally:
            conn.close()

    def query(
        self, sql: str, args: Any = None, database: str | None = None
    ) -> list[tuple[Any, ...]]:
        conn = self.root(database)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, args)
                return list(cur.fetchall())
        finally:
            conn.close()

    def url(self, user: str = CDC_USER, password: str | None = None) -> str:
        """A ``mysql://`` URL (for Airflow connections in the demo and tests)."""
        pw = self.cdc_password if password is None else password
        return f"mysql://{user}:{pw}@127.0.0.1:{self.port}/"

    def __enter__(self) -> LocalMariaDB:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            self.stop()

    @staticmethod
    def available() -> bool:
        return shutil.which("mariadbd") is not None or os.path.exists("/usr/sbin/mariadbd")


def install_data_dir(data_dir: Path) -> Path:
    """``mariadb-install-db`` into ``data_dir``: the system tables, no user but root (no
    password yet), never started; returns ``data_dir``. It holds nothing of a server's
    own (port, server id, binlog, users): a copy can be any server's first data folder."""
    subprocess.run(
        [
            shutil.which("mariadb-install-db") or "/usr/bin/mariadb-install-db",
            "--no-defaults",
            f"--datadir={data_dir}",
            "--user=root",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
        ],
        check=True,
        capture_output=True,
    )
    return data_dir


def replicate(replica: LocalMariaDB, primary: LocalMariaDB) -> None:
    """Make ``replica`` (started with its own ``--server-id``, ``--log-slave-updates``) a GTID
    replica of ``primary`` from the primary's current state: each server created its own
    users at start, so the replica's binlog is reset and the primary's earlier transactions
    are skipped."""
    primary.execute(
        "CREATE USER IF NOT EXISTS 'repl'@'%' IDENTIFIED BY 'repl-secret'",
        "GRANT REPLICATION SLAVE ON *.* TO 'repl'@'%'",
    )
    state = primary.query("SELECT @@GLOBAL.gtid_binlog_pos")[0][0]
    replica.execute(
        "STOP SLAVE",
        "RESET MASTER",
        f"SET GLOBAL gtid_slave_pos = '{state}'",
        f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={primary.port}, "
        "MASTER_USER='repl', MASTER_PASSWORD='repl-secret', MASTER_USE_GTID=slave_pos",
        "START SLAVE",
    )


def wait_replicated(replica: LocalMariaDB, primary: LocalMariaDB, timeout: float = 60) -> None:
    """Wait until ``replica`` applied everything ``primary``'s binlog holds now."""
    state = primary.query("SELECT @@GLOBAL.gtid_binlog_pos")[0][0]
    done = replica.query("SELECT MASTER_GTID_WAIT(%s, %s)", (state, timeout))[0][0]
    if done != 0:
        raise TimeoutError(f"the replica did not reach GTID {state} within {timeout} s")


def promote(replica: LocalMariaDB) -> None:
    """The failover's last step: the replica stops replicating and takes writes."""
    replica.execute("STOP SLAVE", "RESET SLAVE ALL")
