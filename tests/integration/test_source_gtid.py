"""GTID positions on real MariaDB servers (``source.binlog.gtid``): a primary and its GTID replica
(``--log-slave-updates``), the failover (the primary stopped, the replica promoted, writes
going on there), and the refusal of a server that lacks transactions already applied.

What it shows for the stream's failover (issue 22, in progress): a ``file:offset`` of the
primary maps to its GTID state while the primary lives; after the failover the state maps
to a transaction boundary of the new primary's own binlog, where exactly the transactions
after it follow."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from airflow_cdc.errors import MissingTransactionsError
from airflow_cdc.model import BinlogPosition, ServerEpoch
from airflow_cdc.model.gtid import MariaGtid, MariaGtidPos
from airflow_cdc.source.binlog.gtid import (
    end_and_gtid,
    gtid_at,
    position_after,
    require_covers,
    server_gtid,
)
from airflow_cdc.source.connection import connect
from airflow_cdc.source.server import server_info
from devtools.local_mariadb import LocalMariaDB, promote, wait_replicated
from tests.support.pipeline import server_position, source_config
from tests.support.servers import gtid_pair

pytestmark = pytest.mark.integration

DUMP_ID = 4242  # the GTID dump's replica id: neither server's


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[LocalMariaDB, LocalMariaDB]]:
    with gtid_pair() as pair:
        yield pair


def gtid_of(server: LocalMariaDB, position: BinlogPosition | None = None) -> MariaGtidPos | None:
    conn = connect(source_config(server))
    try:
        return server_gtid(conn) if position is None else gtid_at(conn, position)
    finally:
        conn.close()


def gtids_from(server: LocalMariaDB, start: BinlogPosition) -> list[str]:
    """The GTIDs of the transactions in ``server``'s binlog from ``start`` on (its file)."""
    rows = server.query(f"SHOW BINLOG EVENTS IN '{start.file}' FROM {start.offset}")
    assert rows, f"no event at {start}"
    return [str(r[5]).removeprefix("BEGIN GTID ") for r in rows if r[2] == "Gtid"]


def test_a_position_of_the_old_primary_carries_over_to_the_promoted_replica(
    pair: tuple[LocalMariaDB, LocalMariaDB],
) -> None:
    primary, replica = pair
    primary.execute("CREATE DATABASE g", "CREATE TABLE g.t (id INT PRIMARY KEY, v INT)")
    for i in range(10):
        primary.execute(f"INSERT INTO g.t VALUES ({i}, {i})")
    committed = server_position(source_config(primary))  # where a stream committed
    applied = gtid_of(primary, committed)
    assert applied is not None
    assert applied == gtid_of(primary)  # at the end: the server's own state
    assert gtid_of(primary, BinlogPosition(committed.file, committed.offset - 1)) is None
    for i in range(10, 15):
        primary.execute(f"INSERT INTO g.t VALUES ({i}, {i})")
    wait_replicated(replica, primary)

    # A replica that has not replicated everything is refused, naming what it lacks.
    replica.execute("STOP SLAVE")
    primary.execute("INSERT INTO g.t VALUES (99, 99)")
    ahead = gtid_of(primary)
    assert isinstance(ahead, MariaGtidPos)
    lagging = gtid_of(replica)
    assert isinstance(lagging, MariaGtidPos)
    with pytest.raises(MissingTransactionsError, match=rf"\({ahead} not there\).*Fix:"):
        require_covers(lagging, ahead, where="127.0.0.1:replica")
    replica.execute("START SLAVE")
    wait_replicated(replica, primary)

    # The failover: the primary goes, the replica takes the writes under its own id.
    primary.stop()
    promote(replica)
    for i in range(100, 103):
        replica.execute(f"INSERT INTO g.t VALUES ({i}, {i})")
    now = gtid_of(replica)
    assert isinstance(now, MariaGtidPos)
    require_covers(now, applied, where="127.0.0.1:replica")
    assert now.gtids == (MariaGtid(0, 2, applied.gtids[0].seq + 9),)  # 5 + 1 + 3 later

    resume = position_after(source_config(replica), applied, server_id=DUMP_ID, epoch=1)
    assert resume.epoch == 1  # the promoted replica's positions sort after the primary's
    seq = applied.gtids[0].seq
    after = [f"0-1-{seq + n}" for n in range(1, 7)] + [f"0-2-{seq + n}" for n in range(7, 10)]
    assert gtids_from(replica, resume) == after  # exactly what followed, in order
    assert gtid_of(replica, resume) == applied  # a boundary holding exactly the state
    idle = position_after(source_config(replica), now, server_id=DUMP_ID, epoch=1)
    assert idle == server_position(source_config(replica), 1)  # nothing after it yet


def test_the_state_read_around_the_binlog_end_is_the_state_at_that_end(
    mariadb: LocalMariaDB, fresh_db: str
) -> None:
    """end_and_gtid (a chunk's high watermark) under a writer committing all the while: the
    state it reads without the binlog is the one BINLOG_GTID_POS reads at that end."""
    primary = mariadb
    primary.execute(f"CREATE TABLE {fresh_db}.t (id INT PRIMARY KEY)")
    stop = threading.Event()

    def write() -> None:
        conn = primary.root(fresh_db)
        try:
            n = 0
            with conn.cursor() as cursor:
                while not stop.is_set():
                    cursor.execute("INSERT INTO t VALUES (%s)", (n,))
                    n += 1
        finally:
            conn.close()

    writer = threading.Thread(target=write)
    writer.start()
    conn = connect(source_config(primary))
    try:
        found = server_info(conn)
        info = found.in_epoch(ServerEpoch(found.server_id, 0))
        seen = set()
        for _ in range(200):
            end, state = end_and_gtid(conn, info)
            assert state is not None
            assert state == gtid_at(conn, end), end
            seen.add(end)
    finally:
        stop.set()
        writer.join()
        conn.close()
    assert len(seen) > 50  # the writer moved the end between most reads
