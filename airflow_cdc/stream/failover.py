"""Going on after a failover: where the stream resumes in the binlog of a new server.

The stream needs the binlog from a position ``P`` (``stream.start``). When ``P`` was read
from an earlier server (its epoch is older than the server the connection reaches now),
its ``file:offset`` means nothing there; a GTID state does. The rule (:func:`carryover`):

* **resume** from the newest recorded GTID point at or before ``P`` (the stream records
  one at its committed position every ``gtid_record_seconds``, each chunk one at its high
  watermark): the new server's binlog from the first transaction after that state. What
  lies between the point and ``P`` is read again, in order, with the new server's
  positions, which sort after every old one: each key ends at the image of its last change,
  as it was (full row images; the sink keeps the newest position per key).
* **refuse** unless the new server holds every transaction of the newest point recorded on
  an older server (``source.binlog.gtid.require_covers``): data the lake already holds that the new
  server lacks would stay in the lake and never be undone.

Example: the stream committed ``mysql-bin.000412:9001`` (epoch 0) and recorded the GTID
``0-1-5210`` at ``mysql-bin.000412:8120`` 8 s before the primary died. The replica,
promoted, is server 2 at ``0-2-5230``: epoch 1. It covers ``0-1-5210``; its GTID dump
from ``0-1-5210`` starts transaction ``0-1-5211`` at ``replica-bin.000003:44312``; the
stream goes on from ``1@replica-bin.000003:44312``, reading ``0-1-5211`` .. ``0-1-5218``
(already applied) again, then ``0-2-5219`` on.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from airflow_cdc.config import SourceConfig
from airflow_cdc.errors import ConfigurationError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import BinlogPosition, ServerEpoch
from airflow_cdc.model.gtid import GtidPoint
from airflow_cdc.source.binlog.gtid import position_after, require_covers, server_gtid
from airflow_cdc.source.binlog.reader import reader_server_id
from airflow_cdc.source.connection import DbConnection, on_server
from airflow_cdc.source.server import server_info

__all__ = ["Carryover", "carried_to", "carryover", "resume_on"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Carryover:
    """``resume``: the point the stream goes on from; ``applied``: the newest point of an
    earlier server, whose transactions the new server must hold."""

    resume: GtidPoint
    applied: GtidPoint


def carryover(needed: BinlogPosition, epoch: int, points: Sequence[GtidPoint]) -> Carryover:
    """The rule of the module docstring for a stream that needs the binlog from ``needed``
    on the server of ``epoch`` (newer than ``needed``'s), given the recorded ``points``."""
    earlier = [p for p in points if p.position.epoch < epoch]
    usable = [p for p in earlier if p.position <= needed]
    if not usable:
        raise ConfigurationError(
            f"the source is another server now (epoch {epoch}) and the stream needs the "
            f"binlog from {needed} of the one before, but no GTID state was recorded at or "
            "before that position, so its place in the new server's binlog is unknown. Fix: "
            "re-snapshot the tables (trigger the mysql_cdc DAG), or point the source "
            "connection back at the old server if it is still there"
        )
    return Carryover(max(usable, key=lambda p: p.position), max(earlier, key=lambda p: p.position))


def resume_on(
    cfg: SourceConfig, store: MetadataStore, needed: BinlogPosition, server: ServerEpoch
) -> BinlogPosition:
    """Where the stream goes on in the binlog of ``server`` (the connection's now, newer
    than ``needed``'s): :func:`carryover`, checked against the server and mapped by GTID."""
    plan = carryover(needed, server.epoch, store.servers.gtid_points())
    where = f"{cfg.host}:{cfg.port} ({server})"

    def check(conn: DbConnection) -> None:
        info = server_info(conn, server)
        if not info.is_mariadb:
            raise ConfigurationError(
                f"the source {where} is MySQL: resuming after a failover is supported on "
                "MariaDB (GTID domain-server-seq) only for now; re-snapshot the tables"
            )
        require_covers(server_gtid(conn), plan.applied.gtid, where=where)

    on_server(cfg, check, what="checking the new source's GTID state")
    position = position_after(
        cfg, plan.resume.gtid, server_id=reader_server_id(cfg), epoch=server.epoch
    )
    log.warning(
        "the source is another server now: %s; the stream needed %s of the one before and "
        "goes on from %s, the first transaction after the GTID state recorded at %s",
        where,
        needed,
        position,
        plan.resume,
    )
    return position


def carried_to(
    cfg: SourceConfig, store: MetadataStore, needed: BinlogPosition, epoch: int
) -> BinlogPosition:
    """``needed`` itself when it is of the server of ``epoch``; else where the binlog from
    ``needed`` goes on on that server (:func:`resume_on`): a table joining after a failover
    whose snapshot was read from the server before."""
    if needed.epoch >= epoch:
        return needed
    server = store.servers.of_epoch(epoch)
    if server is None:
        raise ConfigurationError(f"epoch {epoch} is not in the metadata DB's source servers")
    return resume_on(cfg, store, needed, server)
