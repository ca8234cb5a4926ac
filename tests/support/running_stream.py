"""A stream job running through spark-submit, as the DDL tests drive it."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from deltalake import DeltaTable

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import TableId
from airflow_cdc.sinks.delta import DeltaSink
from devtools.local_mariadb import LocalMariaDB
from tests.support.pipeline import server_position, source_config

__all__ = ["RunningStream"]


class RunningStream:
    """A stream job running through spark-submit, and what a test step waits for."""

    def __init__(
        self,
        server: LocalMariaDB,
        db: str,
        meta: str,
        lake: Path,
        job: subprocess.Popen[bytes],
        log: Path,
        stream_id: str,
    ) -> None:
        self.server, self.db, self.lake, self.job, self.log = server, db, lake, job, log
        self.stream_id = stream_id
        self.store = MetadataStore.connect(meta)

    def until(self, done: Callable[[], bool], what: str, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if self.job.poll() is not None:
                raise AssertionError(f"the stream exited before {what}:\n{self._tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}:\n{self._tail()}")
            time.sleep(0.3)

    def caught_up(self, what: str) -> None:
        """The stream has applied everything up to the server's position now."""
        target = server_position(source_config(self.server))

        def reached() -> bool:
            state = self.store.streams.state(self.stream_id)
            return bool(state and state.committed_position and state.committed_position >= target)

        self.until(reached, f"the stream to catch up after {what}")

    def joined(self, table: str) -> bool:
        found = TableId(self.db, table)
        return any(
            e.table == found and e.joined for e in self.store.stream_tables.read(self.stream_id)
        )

    def dropped(self, table: str) -> bool:
        found = TableId(self.db, table)
        return any(
            e.table == found and e.dropped for e in self.store.stream_tables.read(self.stream_id)
        )

    def versions(self, table: str) -> int:
        return int(
            DeltaTable(DeltaSink(str(self.lake)).table_uri(TableId(self.db, table))).version()
        )

    def _tail(self) -> str:
        return self.log.read_text(errors="replace")[-8000:]

    def snapshotted_again(self, table: str) -> bool:
        """Whether ``table``'s latest snapshot is one the stream made itself, done, and the
        table reads in the stream again."""
        latest = self.store.watermarks.full_snapshot(TableId(self.db, table))
        own = latest is not None and latest.label.startswith(f"stream {self.stream_id}:")
        return own and latest is not None and latest.done and self.joined(table)

    def settled(self) -> bool:
        """No plan of the stream's own is left to run, and no table waits to join."""
        waiting = [e for e in self.store.stream_tables.read(self.stream_id) if not e.joined]
        unfinished = [
            p
            for p, label in self.store.plans.unfinished()
            if label.startswith(f"stream {self.stream_id}:")
        ]
        return not unfinished and all(e.dropped for e in waiting)
