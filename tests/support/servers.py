"""A MariaDB server of the tests' own: started in a temp folder, stopped and its folder
removed at the end (~0.5 GB a run otherwise), so a run leaves no server behind."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from devtools.local_mariadb import LocalMariaDB
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
