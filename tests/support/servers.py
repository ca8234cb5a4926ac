"""A MariaDB server of the tests' own: started in a temp folder, stopped and its folder
removed at the end (~0.5 GB a run otherwise), so a run leaves no server behind."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from devtools.local_mariadb import LocalMariaDB, replicate
from devtools.temp_folder import started_in_temp_folder


@contextmanager
def own_mariadb(prefix: str, extra_args: tuple[str, ...] = ()) -> Iterator[LocalMariaDB]:
    """A running MariaDB (binlog ROW / FULL / metadata FULL) on a free port, in a temp
    folder named ``<prefix>...``, with ``extra_args`` for ``mariadbd``."""
    if not LocalMariaDB.available():
        pytest.fail(
            "mariadbd not found: run the README's set-up (it installs Debian's mariadb-server)"
        )
    with started_in_temp_folder(
        prefix, lambda base: LocalMariaDB(base, extra_args=extra_args)
    ) as server:
        yield server


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
