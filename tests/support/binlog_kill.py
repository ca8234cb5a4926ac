"""Fault 4 mid-binlog: ``KILL`` of a stream's binlog dump connection while it is sending.

A dump shows as ``Binlog Dump`` in the process list only while the server is sending
(milliseconds for a writer's trickle), so a big transaction (``make_busy``, run alongside)
keeps the next batch's dump busy for seconds. The process list is polled on one connection,
and a dump seen for 0.3 s is killed. Used by the soak and ``test_stream_pipeline``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

from devtools.local_mariadb import LocalMariaDB

__all__ = ["kill_busy_binlog_dump"]


def kill_busy_binlog_dump(
    server: LocalMariaDB,
    make_busy: Callable[[], None],
    timeout: float = 45,
    user: str = "cdc",
    busy_for: float = 0.3,
) -> list[int]:
    """Run ``make_busy`` on a thread and KILL every dump connection of ``user`` that stays
    busy for ``busy_for`` s; returns the killed connection ids (empty: none seen in time)."""
    busy_thread = threading.Thread(target=make_busy)
    busy_thread.start()
    deadline, conn = time.monotonic() + timeout, server.root()
    seen: dict[int, float] = {}  # dump connection id -> first seen
    try:
        with conn.cursor() as cur:
            while time.monotonic() < deadline:
                cur.execute(
                    "SELECT ID FROM information_schema.PROCESSLIST"
                    " WHERE USER = %s AND COMMAND LIKE 'Binlog Dump%%'",
                    (user,),
                )
                now = time.monotonic()
                ids = [int(row[0]) for row in cur.fetchall()]
                busy = [i for i in ids if now - seen.setdefault(i, now) >= busy_for]
                for dump_id in busy:
                    with contextlib.suppress(Exception):  # it may have ended meanwhile
                        cur.execute(f"KILL {dump_id}")
                if busy:
                    return busy
                time.sleep(0.005)
    finally:
        conn.close()
        busy_thread.join()
    return []
