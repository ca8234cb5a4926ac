"""The GTID state at the stream's committed position, recorded every so often: after a
failover the stream resumes from the newest one (``stream.failover``), so how far back
it reads again is about ``StreamBounds.gtid_record_seconds`` of binlog.

``BINLOG_GTID_POS`` reads the position's file from its start (0.02 s at 6 MB into a file,
0.14 s at 614 MB here), so it runs on a thread of its own, never in a batch's time, and
not after every batch. It asks the server who it is in the same connection: a position
of the old server looked up on a new one would record a GTID state that is not its own.
"""

from __future__ import annotations

import logging
import threading
import time

from airflow_cdc.config import SourceConfig
from airflow_cdc.errors import CdcError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import BinlogPosition
from airflow_cdc.model.gtid import GtidPoint
from airflow_cdc.source.binlog.gtid import gtid_at
from airflow_cdc.source.connection import DbConnection, on_server
from airflow_cdc.source.server import server_info

__all__ = ["GtidRecorder"]

log = logging.getLogger(__name__)


class GtidRecorder:
    """``committed(position)`` after each batch; records on a thread when one is due."""

    def __init__(
        self, cfg: SourceConfig, store: MetadataStore, recorded_by: str, every: float
    ) -> None:
        self._cfg = cfg
        self._store = store
        self._recorded_by = recorded_by
        self._every = every
        self._due = 0.0  # monotonic time of the next recording
        self._lock = threading.Lock()
        self._busy = False
        self._off = False  # MySQL: no BINLOG_GTID_POS

    def committed(self, position: BinlogPosition) -> None:
        """The stream committed up to ``position`` (a transaction boundary)."""
        with self._lock:
            if self._off or self._busy or time.monotonic() < self._due:
                return
            self._busy = True
            self._due = time.monotonic() + self._every
        threading.Thread(
            target=self._record_quietly, args=(position,), name="gtid", daemon=True
        ).start()

    def record(self, position: BinlogPosition) -> GtidPoint | None:
        """Record the GTID state at ``position`` now; None when the server cannot tell (a
        MySQL server, a server that is not ``position``'s any more)."""
        server = self._store.servers.of_epoch(position.epoch)
        if server is None:
            raise CdcError(f"epoch {position.epoch} is not in the metadata DB's source servers")

        def look(conn: DbConnection) -> GtidPoint | None:
            info = server_info(conn, server)
            if not info.is_mariadb:
                self._off = True
                log.warning(
                    "%s has no BINLOG_GTID_POS: GTID states are not recorded, and the stream "
                    "cannot go on by itself after a failover",
                    info,
                )
                return None
            gtid = gtid_at(conn, position)
            return None if gtid is None else GtidPoint(position, gtid)

        point = on_server(self._cfg, look, what="reading the GTID state of the position")
        if point is not None:
            self._store.servers.record_gtid([point], self._recorded_by)
        return point

    def _record_quietly(self, position: BinlogPosition) -> None:
        try:
            self.record(position)
        except CdcError as exc:  # a switched server, an outage: the next batch tries again
            log.warning("could not record the GTID state at %s: %s", position, exc)
        except Exception:
            log.exception("could not record the GTID state at %s", position)
        finally:
            with self._lock:
                self._busy = False
