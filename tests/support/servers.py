"""A MariaDB server of the tests' own: started in a temp folder, stopped and its folder
removed at the end (~0.5 GB a run otherwise), so a run leaves no server behind."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from devtools.local_mariadb import LocalMariaDB


@contextmanager
def own_mariadb(prefix: str, extra_args: tuple[str, ...] = ()) -> Iterator[LocalMariaDB]:
    """A running MariaDB (binlog ROW / FULL / metadata FULL) on a free port, in a temp
    folder named ``<prefix>...``, with ``extra_args`` for ``mariadbd``."""
    if not LocalMariaDB.available():
        pytest.fail(
            "mariadbd not found: run the README's set-up (it installs Debian's mariadb-server)"
        )
    base = Path(tempfile.mkdtemp(prefix=prefix))
    server = LocalMariaDB(base, extra_args=extra_args)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
