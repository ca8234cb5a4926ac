"""A MariaDB server of the tests' own: started in a temp folder, stopped and its folder
removed at the end (~0.5 GB a run otherwise), so a run leaves no server behind.

``mariadb-install-db`` runs once a session (in a temp folder removed at exit): each
server's data folder starts as a copy of that one."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from devtools.local_mariadb import LocalMariaDB, install_data_dir, replicate
from devtools.temp_folder import started_in_temp_folder

_installed: list[Path] = []


def installed_data_dir() -> Path:
    """The session's installed data folder (made on first use)."""
    if not _installed:
        folder = Path(tempfile.mkdtemp(prefix="cdc-mariadb-installed-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _installed.append(install_data_dir(folder / "data"))
    return _installed[0]


@contextmanager
def own_mariadb(prefix: str, extra_args: tuple[str, ...] = ()) -> Iterator[LocalMariaDB]:
    """A running MariaDB (binlog ROW / FULL / metadata FULL) on a free port, in a temp
    folder named ``<prefix>...``, with ``extra_args`` for ``mariadbd``."""
    if not LocalMariaDB.available():
        pytest.fail(
            "mariadbd not found: run the README's set-up (it installs Debian's mariadb-server)"
        )
    with started_in_temp_folder(
        prefix,
        lambda base: LocalMariaDB(base, extra_args=extra_args, installed=installed_data_dir()),
    ) as server:
        yield server


#: A server configured as shops configure theirs: every binlog event above 10 bytes
#: compressed (``log_bin_compress``; the default threshold is 256), no binlog checksums, a
#: time zone that is not UTC, and latin1 as the server's character set.
SHOP_ARGS = (
    "--log-bin-compress=ON",
    "--log-bin-compress-min-len=10",
    "--binlog-checksum=NONE",
    "--default-time-zone=+05:30",
    "--character-set-server=latin1",
    "--collation-server=latin1_swedish_ci",
)


#: A GTID primary or replica whose binlog holds what it replicates (a promotable replica).
GTID_ARGS = ("--log-slave-updates", "--gtid-strict-mode=1")


@contextmanager
def gtid_pair() -> Iterator[tuple[LocalMariaDB, LocalMariaDB]]:
    """A primary (server id 1) and its GTID replica (server id 2), replicating."""
    with (
        own_mariadb("cdc-primary-", GTID_ARGS) as primary,
        own_mariadb("cdc-replica-", ("--server-id=2", "--skip-slave-start", *GTID_ARGS)) as replica,
    ):
        replicate(replica, primary)
        yield primary, replica


#: The servers a module runs its tests against when it runs them on both (see
#: :func:`stock_or_shop`).
SERVERS = ("stock", "shop")


def stock_or_shop(request: pytest.FixtureRequest, stock: LocalMariaDB) -> LocalMariaDB:
    """The server a module's ``mariadb`` fixture, parametrized by :data:`SERVERS`, gives:
    the session's stock server or its shop server (``shop_mariadb``)."""
    if request.param == "shop":
        server: LocalMariaDB = request.getfixturevalue("shop_mariadb")
        return server
    return stock
