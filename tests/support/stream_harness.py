"""The stream job's own source reader and batch function, driven in-process without Spark.

Offsets, partitions, the executor's ``read`` and the driver's ``foreachBatch`` function are
the job's code (``spark.binlog_source``, ``stream.batch_writer``); only Structured Streaming's
loop and its checkpoint are replaced by a few lines here, so a test of what a batch does
costs no JVM. The job itself (with Spark) runs in the stream pipeline tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow_cdc.config import StreamJobSpec
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import TableId
from airflow_cdc.observe import install, uninstall
from tests.support.pause_points import PausePoints


class _Frame:
    def __init__(self, rows: list[tuple[str, str, bytes]]) -> None:
        self._rows = rows

    def collect(self) -> list[tuple[str, str, bytes]]:
        return self._rows  # Spark's Rows are tuples too


class InProcessStream:
    """``run_batch()`` reads from the last offset to the server's position and applies it."""

    OWNER = "in-process-test"

    def __init__(
        self,
        spec: StreamJobSpec,
        workdir: Path,
        *,
        resume: InProcessStream | None = None,
        pause_dir: Path | None = None,
    ) -> None:
        """``resume``: continue where that (closed) stream's last committed batch ended, as
        a restart from Spark's checkpoint does; ``pause_dir``: this process pauses at the
        points armed there until :meth:`close`."""
        from airflow_cdc.spark.binlog_source import BinlogStreamReader
        from airflow_cdc.stream.batch_writer import BatchWriter

        job_file = spec.write(workdir / f"stream-{spec.stream_id}.json")
        self.spec = spec
        self.store = MetadataStore.connect(spec.metadata_url)
        self.store.streams.acquire_lease(spec.stream_id, list(spec.tables), self.OWNER, 600)
        self.store.stream_tables.request(
            spec.stream_id,
            [TableId.parse(t) for t in spec.tables],
            requested_by="test",
            rearm_dropped=False,  # as the stream job starts
        )
        self.reader = BinlogStreamReader({"job_file": str(job_file)})
        self.writer = BatchWriter(spec, self.OWNER)
        self.offset: dict[str, Any] = (
            self.reader.initialOffset() if resume is None else resume.offset
        )
        self.batch_id = 0 if resume is None else resume.batch_id
        self.previous: dict[str, Any] | None = None
        self.pauses = PausePoints(str(pause_dir)) if pause_dir is not None else None
        if self.pauses is not None:
            install(self.pauses)

    def run_batch(self) -> None:
        """One micro-batch; on an exception the offset stays (Spark would replay it)."""
        end = self.reader.latestOffset(self.offset, None)  # type: ignore[arg-type]
        self._run(end)

    def read_batch(self) -> tuple[dict[str, Any], list[tuple[str, str, bytes]]]:
        """The next batch planned and read by its slices, not applied yet: its end and
        rows, for :meth:`apply_read_batch` (a race between the two is the test's)."""
        end = self.reader.latestOffset(self.offset, None)  # type: ignore[arg-type]
        return end, self._rows(end)

    def apply_read_batch(self, read: tuple[dict[str, Any], list[tuple[str, str, bytes]]]) -> None:
        """Apply a batch :meth:`read_batch` read, as the driver does when its slices end."""
        end, rows = read
        self.writer(_Frame(rows), self.batch_id)
        self.batch_id += 1
        self.previous, self.offset = self.offset, end

    def replay_last_batch(self) -> None:
        """The last batch again, as Spark runs it after a crash before its commit."""
        assert self.previous is not None, "no batch ran yet"
        end, self.offset = self.offset, self.previous
        self.batch_id -= 1
        self._run(end)

    def _run(self, end: dict[str, Any]) -> None:
        self.apply_read_batch((end, self._rows(end)))

    def _rows(self, end: dict[str, Any]) -> list[tuple[str, str, bytes]]:
        return [
            row
            for partition in self.reader.partitions(self.offset, end)
            for row in self.reader.read(partition)
        ]

    def run_until_caught_up(self, limit: int = 200) -> None:
        """Batches until the offset reaches the server's position when this is called."""
        from airflow_cdc.stream.slice_rows import Offset
        from tests.support.pipeline import server_position

        epoch = Offset.from_map(self.offset).position.epoch
        target = server_position(self.spec.source, epoch)
        for _ in range(limit):
            if Offset.from_map(self.offset).position >= target:
                return
            self.run_batch()
        raise AssertionError(f"not caught up after {limit} batches: at {self.offset}")

    def close(self) -> None:
        if self.pauses is not None:
            uninstall(self.pauses)
        self.store.streams.release_lease(self.spec.stream_id, self.OWNER)
