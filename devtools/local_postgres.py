"""A throw-away PostgreSQL server in a folder, for the metadata DB in tests and demos.

It runs Debian's ``initdb`` and ``postgres`` (``/usr/lib/postgresql/<version>/bin``, installed
by ``scripts/setup.sh``) on a free loopback port. PostgreSQL refuses to run as root, so when
this process is root the folder is handed to the ``postgres`` OS user and both programs run
as that user (``subprocess`` switches the user itself, like ``runuser -u postgres --``, so
the process started is the postmaster and can be signalled directly).

Authentication: ``scram-sha-256`` over TCP (so a wrong password is refused, as on a real
server), ``trust`` on the Unix socket inside the folder. Durability is switched off
(``fsync=off``): the data is thrown away anyway and the tests run faster.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devtools.local_mariadb import free_port

__all__ = ["LocalPostgres", "postgres_bin_dir"]

OS_USER = "postgres"
SUPERUSER = "postgres"
_DATABASE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def postgres_bin_dir() -> Path | None:
    """The folder holding ``initdb`` and ``postgres``: Debian's newest version, else PATH."""

    def version(path: str) -> tuple[int, ...]:
        name = Path(path).parent.name
        return tuple(int(part) for part in name.split(".") if part.isdigit())

    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=version)
    if candidates:
        return Path(candidates[-1]).parent
    found = shutil.which("postgres")
    if found and shutil.which("initdb"):
        return Path(found).resolve().parent
    return None


@dataclass
class LocalPostgres:
    """One server. ``start()`` runs ``initdb`` on first use; ``stop()`` shuts it down fast.

    ``base_dir`` must be reachable by the ``postgres`` OS user when running as root (a
    ``tempfile.mkdtemp()`` folder is; pytest's ``tmp_path`` under a 0700 folder is not).
    """

    base_dir: Path
    port: int = field(default_factory=free_port)
    password: str = "pg-secret"
    settings: tuple[str, ...] = (
        "fsync=off",
        "synchronous_commit=off",
        "full_page_writes=off",
        "max_connections=200",
        "shared_buffers=64MB",
    )
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def log_path(self) -> Path:
        return self.base_dir / "postgres.log"

    @staticmethod
    def available() -> bool:
        return postgres_bin_dir() is not None

    # -- running as the postgres OS user -------------------------------------------------

    @staticmethod
    def _as_root() -> bool:
        return os.geteuid() == 0

    def _user_kwargs(self) -> dict[str, Any]:
        """``subprocess`` arguments that drop root to the ``postgres`` OS user."""
        if not self._as_root():
            return {}
        try:
            entry = pwd.getpwnam(OS_USER)
        except KeyError:
            raise RuntimeError(
                f"PostgreSQL refuses to run as root and there is no {OS_USER!r} OS user: "
                "install Debian's postgresql package (scripts/setup.sh does)"
            ) from None
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": entry.pw_dir,
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
        }
        return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": [], "env": env}

    def _chown(self) -> None:
        if not self._as_root():
            return
        entry = pwd.getpwnam(OS_USER)
        for root, dirs, files in os.walk(self.base_dir):
            for name in (*dirs, *files):
                os.chown(os.path.join(root, name), entry.pw_uid, entry.pw_gid)
        os.chown(self.base_dir, entry.pw_uid, entry.pw_gid)

    def _binary(self, name: str) -> str:
        folder = postgres_bin_dir()
        if folder is None:
            raise RuntimeError(
                "PostgreSQL (initdb, postgres) not found: run scripts/setup.sh (it installs "
                "Debian's postgresql; the system service is never started)"
            )
        return str(folder / name)

    # -- life cycle ----------------------------------------------------------------------

    def _initdb(self) -> None:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        pwfile = self.base_dir / "pwfile"
        pwfile.write_text(self.password + "\n")
        pwfile.chmod(0o600)
        self._chown()
        try:
            subprocess.run(
                [
                    self._binary("initdb"),
                    f"--pgdata={self.data_dir}",
                    f"--username={SUPERUSER}",
                    f"--pwfile={pwfile}",
                    "--auth-host=scram-sha-256",
                    "--auth-local=trust",
                    "--encoding=UTF8",
                    "--locale=C.UTF-8",
                    "--no-instructions",
                ],
                check=True,
                capture_output=True,
                cwd=self.base_dir,
                **self._user_kwargs(),
            )
        except subprocess.CalledProcessError as error:
            output = (error.stdout + error.stderr).decode(errors="replace")[-3000:]
            raise RuntimeError(f"initdb failed with {error.returncode}:\n{output}") from None
        finally:
            pwfile.unlink(missing_ok=True)

    def start(self, timeout: float = 60.0) -> LocalPostgres:
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb()
        args = [
            self._binary("postgres"),
            "-D",
            str(self.data_dir),
            "-p",
            str(self.port),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            f"unix_socket_directories={self.base_dir}",
        ]
        for setting in self.settings:
            args += ["-c", setting]
        log = open(self.log_path, "ab")  # noqa: SIM115 (handed to the child, closed below)
        try:
            self._process = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.base_dir,
                start_new_session=True,
                **self._user_kwargs(),
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"postgres exited with {self._process.returncode}:\n{self._log_tail()}"
                )
            try:
                self.connect().close()
                return self
            except Exception:
                if time.monotonic() > deadline:
                    self.stop(kill=True)
                    raise RuntimeError(
                        f"postgres did not accept connections in {timeout} s:\n{self._log_tail()}"
                    ) from None
                time.sleep(0.1)

    def _log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:] if self.log_path.exists() else ""

    def stop(self, kill: bool = False) -> None:
        """Fast shutdown (SIGINT: sessions are ended, no wait for clients)."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGQUIT if kill else signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            self.stop()

    # -- clients -------------------------------------------------------------------------

    def url(
        self,
        database: str = "postgres",
        *,
        user: str = SUPERUSER,
        password: str | None = None,
        driver: str = "postgresql+psycopg",
    ) -> str:
        """A SQLAlchemy URL over TCP (``postgresql+psycopg://``; the password included)."""
        from sqlalchemy.engine import URL

        return URL.create(
            driver,
            username=user,
            password=self.password if password is None else password,
            host="127.0.0.1",
            port=self.port,
            database=database,
        ).render_as_string(hide_password=False)

    def connect(self, database: str = "postgres") -> Any:
        """A psycopg connection as the superuser over TCP (autocommit)."""
        import psycopg

        return psycopg.connect(
            host="127.0.0.1",
            port=self.port,
            user=SUPERUSER,
            password=self.password,
            dbname=database,
            autocommit=True,
            connect_timeout=5,
        )

    def create_database(self, name: str, *, drop: bool = True, template: str | None = None) -> str:
        """An empty database ``name`` (dropped first if it exists), or with ``template`` a
        copy of that database (which must have no open connection); returns its URL."""
        for each in (name, template or name):
            if not _DATABASE_NAME.match(each):
                raise ValueError(f"not a plain lower-case database name: {each!r}")
        with contextlib.closing(self.connect()) as connection:
            if drop:
                connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            copy = f' TEMPLATE "{template}"' if template else ""
            connection.execute(f'CREATE DATABASE "{name}"{copy}')
        return self.url(name)
