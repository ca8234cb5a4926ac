"""The source servers of a metadata DB, one per epoch, and GTID states recorded at positions.

Epochs (``cdc_source_servers``): the first server a job reads positions from is epoch 0.
The pipeline moves to another server (a failover promoted a replica, and the connection
points at it) when a stream starts there: that server starts the next epoch, and every
position read from it sorts after those read before (``model.position``); a server seen
before that comes back after another one starts a new epoch too. Chunk jobs follow: one
reaching another server than the newest epoch's is refused (its rows would be ordered
against the stream's by two different servers' positions), unless no stream has committed
anything yet (a failover during the first snapshot: the stream then starts from the
chunks' GTID states).

GTID points (``cdc_gtid_points``): chunks record the GTID state at their high watermark,
the stream at its committed position every so often; a stream that starts on a new server
resumes from them (``stream.failover``). Each recorder keeps its newest
:data:`KEEP_POINTS`; older ones are never needed once a newer one of the same recorder is
in the metadata DB, except chunks' (one per chunk, kept with their chunk's plan).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from airflow_cdc.config import SourceConfig
from airflow_cdc.errors import MetadataError, SourceSwitchedError
from airflow_cdc.metadata import codec
from airflow_cdc.metadata.engine import with_retry
from airflow_cdc.metadata.schema import gtid_points as t_points
from airflow_cdc.metadata.schema import source_servers as t_servers
from airflow_cdc.model import BinlogPosition, ServerEpoch
from airflow_cdc.model.gtid import GtidPoint, MariaGtidPos
from airflow_cdc.model.position import MAX_EPOCH
from airflow_cdc.source.connection import on_server
from airflow_cdc.source.server import server_info

__all__ = ["KEEP_POINTS", "SourceServers"]

#: GTID points kept per recorder (a stream records one a few times a minute).
KEEP_POINTS = 20


class SourceServers:
    """The metadata DB's source servers and GTID points (``MetadataStore.servers``)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def current(self, cfg: SourceConfig, *, may_switch: bool) -> ServerEpoch:
        """The server ``cfg`` reaches now, and its epoch (:meth:`epoch_of`)."""
        return self.epoch_of(_server_id(cfg), may_switch=may_switch)

    def would_be(self, cfg: SourceConfig) -> ServerEpoch:
        """The server ``cfg`` reaches now and the epoch it has, or would get by a stream
        starting there; nothing is recorded (a stream checks the server first)."""
        return _epoch_for(self.newest(), _server_id(cfg))

    def epoch_of(self, server_id: int, *, may_switch: bool) -> ServerEpoch:
        """The epoch of the server with ``server_id``, the connection's now: the newest
        epoch if it is that server's, else (``may_switch``) a new epoch for it; raises
        :class:`SourceSwitchedError` for another server without ``may_switch``."""

        def write(connection: Connection) -> ServerEpoch:
            row = connection.execute(
                sa.select(t_servers.c.server_id, t_servers.c.epoch)
                .order_by(t_servers.c.epoch.desc())
                .limit(1)
            ).first()
            newest = None if row is None else ServerEpoch(int(row.server_id), int(row.epoch))
            found = _epoch_for(newest, server_id)
            if found == newest:
                return found
            if newest is not None and not may_switch:
                raise SourceSwitchedError(
                    f"the source connection reaches server_id {server_id}, but the pipeline "
                    f"reads server_id {newest.server_id} (epoch {newest.epoch}). After a "
                    "failover the stream moves the pipeline to the new server: start (or "
                    "restart) the stream on it first, then run this again; otherwise point "
                    "the source connection back at the server the stream reads"
                )
            epoch = found.epoch
            if epoch > MAX_EPOCH:
                raise MetadataError(
                    f"the source is server_id {server_id} now, the {epoch + 1}th server this "
                    f"metadata DB has seen; positions carry at most {MAX_EPOCH + 1} servers. "
                    "Fix: re-snapshot into a new metadata DB and lake (a new pipeline)"
                )
            connection.execute(
                sa.insert(t_servers).values(
                    epoch=epoch,
                    server_id=server_id,
                    first_seen_at=codec.to_db_time(codec.utc_now()),
                )
            )
            return found

        try:
            return with_retry(self._engine, write, write=True, what="registering the source in")
        except SourceSwitchedError:
            raise
        except MetadataError:
            # Two jobs meeting a new server at once: one insert wins, the other's fails on
            # the key, and a second look finds the winner's row.
            return with_retry(self._engine, write, write=True, what="registering the source in")

    def newest(self) -> ServerEpoch | None:
        found = self.epochs()
        return found[-1] if found else None

    def of_epoch(self, epoch: int) -> ServerEpoch | None:
        """The server of ``epoch`` (None: no such epoch)."""
        return next((s for s in self.epochs() if s.epoch == epoch), None)

    def epochs(self) -> list[ServerEpoch]:
        def read(connection: Connection) -> list[ServerEpoch]:
            rows = connection.execute(
                sa.select(t_servers.c.server_id, t_servers.c.epoch).order_by(t_servers.c.epoch)
            )
            return [ServerEpoch(int(server_id), int(epoch)) for server_id, epoch in rows]

        return with_retry(self._engine, read, write=False, what="reading the sources from")

    def record_gtid(self, points: Sequence[GtidPoint], recorded_by: str) -> None:
        """Record ``points``; keep the newest :data:`KEEP_POINTS` of ``recorded_by``
        (``chunk``: all of them)."""
        # Chunks of one unit often end at the same high watermark (an idle server).
        points = list({p.position: p for p in points}.values())
        if not points:
            return
        now = codec.to_db_time(codec.utc_now())

        rows = [
            {
                "position": codec.encode_position(p.position),
                "position_sort": codec.position_sort_text(p.position),
                "gtid": str(p.gtid),
                "recorded_by": recorded_by,
                "recorded_at": now,
            }
            for p in points
        ]

        def write(connection: Connection) -> None:
            texts = [row["position"] for row in rows]
            connection.execute(sa.delete(t_points).where(t_points.c.position.in_(texts)))
            connection.execute(sa.insert(t_points), rows)
            if recorded_by != "chunk":
                _prune(connection, recorded_by)

        with_retry(self._engine, write, write=True, what="recording GTID states in")

    def gtid_points(self) -> list[GtidPoint]:
        """Every recorded point, in position order."""

        def read(connection: Connection) -> list[GtidPoint]:
            rows = connection.execute(
                sa.select(t_points.c.position, t_points.c.gtid).order_by(t_points.c.position_sort)
            )
            return [
                GtidPoint(BinlogPosition.from_text(position), MariaGtidPos.parse(gtid))
                for position, gtid in rows
            ]

        return with_retry(self._engine, read, write=False, what="reading GTID states from")


def _server_id(cfg: SourceConfig) -> int:
    """The ``@@server_id`` of the server ``cfg`` reaches now."""
    info = on_server(cfg, server_info, what="asking the source which server it is")
    return info.server_id


def _epoch_for(newest: ServerEpoch | None, server_id: int) -> ServerEpoch:
    """The epoch of ``server_id`` given the ``newest`` registered: that one if it is the
    same server, else the next (0 for the first)."""
    if newest is not None and newest.server_id == server_id:
        return newest
    return ServerEpoch(server_id, 0 if newest is None else newest.epoch + 1)


def _prune(connection: Connection, recorded_by: str) -> None:
    kept = (
        sa.select(t_points.c.position_sort)
        .where(t_points.c.recorded_by == recorded_by)
        .order_by(t_points.c.position_sort.desc())
        .offset(KEEP_POINTS - 1)
        .limit(1)
    )
    oldest_kept = connection.execute(kept).scalar()
    if oldest_kept is not None:
        connection.execute(
            sa.delete(t_points).where(
                t_points.c.recorded_by == recorded_by, t_points.c.position_sort < oldest_kept
            )
        )
