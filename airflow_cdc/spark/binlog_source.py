"""A PySpark Python streaming data source over the MySQL/MariaDB binlog.

Offsets are binlog positions at transaction boundaries: ``{"file", "pos", "seen_at"}``
(``seen_at``: when that position was the server's newest, for the lag figure). A
micro-batch ``(start, end]`` is read by one partition with mysql-replication; every row
change comes out as ``(tbl, pos, payload)`` with the decoded images pickled in
``payload``, plus one final ``boundary`` row carrying ``end`` (and the batch's start and
the tables read), so the batch function knows the position it has committed up to.

Which tables a batch reads is decided on the driver when Spark plans the batch
(``partitions``): the tables the stream has joined plus the ones asked for whose full
snapshot is done (``metadata.stream_tables``); the batch function joins the latter.

Options: ``job_file`` (the stream's 0600 job file; secrets never travel as options, which
Spark shows in plans and the UI).
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow

from airflow_cdc.config import StreamJobSpec
from airflow_cdc.metadata.codec import table_to_text
from airflow_cdc.model import BinlogPosition, TableId

__all__ = ["BOUNDARY", "SCHEMA", "BinlogDataSource", "boundary_payload", "decode_payload"]

SOURCE_NAME = "airflow_cdc_binlog"
SCHEMA = "tbl STRING, pos STRING, payload BINARY"
#: ``tbl`` of the row that closes a batch; its ``pos`` is the batch's end offset.
BOUNDARY = ""


def decode_payload(payload: bytes) -> Any:
    return pickle.loads(payload)


def boundary_payload(start: BinlogPosition, seen_at: float, tables: list[str]) -> bytes:
    """The closing row's payload: where the batch started, when its end was the server's
    newest position, and the tables it read."""
    return pickle.dumps({"start": start.to_text(), "seen_at": seen_at, "tables": tables})


def _offset(position: BinlogPosition, seen_at: float) -> dict[str, Any]:
    return {"file": position.file, "pos": position.offset, "seen_at": seen_at}


def _position(offset: dict[str, Any]) -> BinlogPosition:
    return BinlogPosition(str(offset["file"]), int(offset["pos"]))


class _Range(InputPartition):
    def __init__(self, start: dict[str, Any], end: dict[str, Any], tables: list[str]) -> None:
        super().__init__(None)
        self.start = start
        self.end = end
        self.tables = tables


class _BinlogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str]) -> None:
        self._spec = StreamJobSpec.read_file(options["job_file"])
        self._target: BinlogPosition | None = None
        self._metadata: Any = None

    def _server_position(self) -> BinlogPosition:
        from airflow_cdc.source.connection import connect
        from airflow_cdc.source.server import current_position, server_info

        conn = connect(self._spec.source)
        try:
            return current_position(conn, server_info(conn))
        finally:
            conn.close()

    def __getstate__(self) -> dict[str, Any]:
        # Spark pickles the reader for read() on the executors: no DB engine travels.
        state = dict(self.__dict__)
        state["_metadata"] = None
        return state

    def _store(self) -> Any:
        from airflow_cdc.metadata import MetadataStore

        if self._metadata is None:
            self._metadata = MetadataStore.connect(self._spec.metadata_url)
        return self._metadata

    def initialOffset(self) -> dict[str, Any]:
        from airflow_cdc.stream.joining import joined_tables
        from airflow_cdc.stream.start import start_position

        # No checkpoint: start early enough for the spec's tables and for every table the
        # stream joined before (a checkpoint deleted by hand must not skip their changes).
        store = self._store()
        tables = [TableId.parse(name) for name in self._spec.tables]
        tables += [t for t in joined_tables(store, self._spec.stream_id) if t not in tables]
        return _offset(start_position(store, tables), time.time())

    def prepareForTriggerAvailableNow(self) -> None:
        # until_caught_up: process up to the server's position when the query starts.
        self._target = self._server_position()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        from airflow_cdc.stream.joining import tables_waiting_to_join

        latest = self._server_position()
        if self._target is not None and self._target < latest:
            latest = self._target
        if latest <= _position(start):
            # An idle server: run an empty batch anyway when a table is ready to join, so
            # it joins now rather than at the next write (continuous mode only).
            if self._target is None and tables_waiting_to_join(self._store(), self._spec.stream_id):
                return _offset(_position(start), time.time())
            return start
        return _offset(latest, time.time())

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[_Range]:
        from airflow_cdc.stream.joining import tables_to_read

        tables = tables_to_read(self._store(), self._spec.stream_id)
        return [_Range(start, end, [table_to_text(table) for table in tables])]

    def read(self, partition: InputPartition) -> Iterator[tuple[str, str, bytes]]:
        assert isinstance(partition, _Range)
        from airflow_cdc.source.catalog import load_table_schema
        from airflow_cdc.source.connection import connect
        from airflow_cdc.stream.binlog_reader import read_changes

        tables = [TableId.parse(name) for name in partition.tables]
        start, end = _position(partition.start), _position(partition.end)
        if tables and start < end:
            conn = connect(self._spec.source)
            try:
                schemas = {table: load_table_schema(conn, table) for table in tables}
            finally:
                conn.close()
            for event in read_changes(self._spec.source, schemas, start, end):
                payload = pickle.dumps((event.kind.value, event.before, event.after))
                yield (table_to_text(event.table), event.position.to_text(), payload)
        seen_at = float(partition.end.get("seen_at", 0.0))
        yield (BOUNDARY, end.to_text(), boundary_payload(start, seen_at, partition.tables))

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to acknowledge: the server keeps the binlog, the checkpoint the offset."""


class BinlogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: Any) -> _BinlogStreamReader:
        return _BinlogStreamReader(dict(self.options))
