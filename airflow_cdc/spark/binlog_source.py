"""A PySpark Python streaming data source over the MySQL/MariaDB binlog: a thin adapter.

Offsets are binlog positions at transaction boundaries, checkpointed by Spark as
``{"file", "pos", "seen_at"}`` (``stream.slice_rows.Offset.to_map``). Planning a batch is
``stream.batch_planner``'s (on the driver); reading a slice is ``stream.slice_reader``'s (one
Spark task per slice, on an executor); applying the batch is ``stream.batch_writer``'s.

Options: ``job_file`` (the stream's 0600 job file; secrets never travel as options, which
Spark shows in plans and the UI), ``parallelism`` (the executors' cores: slices per batch,
unless ``decode_parallelism`` is set) and ``initial_position`` (``file:pos``: where a query
without a checkpoint starts, given when the driver applied a start batch up to there, see
:meth:`BinlogStreamReader.start_batch`; else the tables' watermarks decide).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow

from airflow_cdc.config import StreamJobSpec
from airflow_cdc.model import BinlogPosition
from airflow_cdc.stream.slice_reader import SliceRow, read_slice
from airflow_cdc.stream.slice_rows import Offset, SlicePlan

if TYPE_CHECKING:
    from airflow_cdc.stream.batch_planner import BatchPlanner

__all__ = ["SCHEMA", "SOURCE_NAME", "BinlogDataSource", "BinlogStreamReader"]

SOURCE_NAME = "airflow_cdc_binlog"
SCHEMA = "kind STRING, ref STRING, payload BINARY"


def _to_spark(offset: Offset) -> dict[str, Any]:
    return offset.to_map()


def _from_spark(offset: dict[str, Any]) -> Offset:
    return Offset.from_map(offset)


class _Range(InputPartition):
    """One slice of a micro-batch, as Spark hands it to an executor."""

    def __init__(self, plan: SlicePlan) -> None:
        super().__init__(None)
        self.plan = plan


class BinlogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str]) -> None:
        # The planner (metadata DB, catalog) only on the driver: executors unpickle this
        # reader without it, so their Python workers never import SQLAlchemy.
        from airflow_cdc.stream.batch_planner import BatchPlanner

        self._spec = StreamJobSpec.read_file(options["job_file"])
        initial = options.get("initial_position") or None
        self._planner: BatchPlanner | None = BatchPlanner(
            self._spec,
            int(options.get("parallelism") or 0),
            BinlogPosition.from_text(initial) if initial else None,
        )

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_planner": None}

    @property
    def planner(self) -> BatchPlanner:
        if self._planner is None:
            raise RuntimeError("the stream's batches are planned on the driver only")
        return self._planner

    def initialOffset(self) -> dict[str, Any]:
        return _to_spark(self.planner.initial_offset())

    def start_batch(self, max_bytes: int) -> tuple[dict[str, Any], list[_Range]]:
        """The driver's start batch (``BatchPlanner.start_batch``): its end and slices."""
        end, slices = self.planner.start_batch(max_bytes)
        return _to_spark(end), [_Range(plan) for plan in slices]

    def prepareForTriggerAvailableNow(self) -> None:
        self.planner.stop_at_current_position()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        current = _from_spark(start)
        latest = self.planner.latest_offset(current)
        return start if latest == current else _to_spark(latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[_Range]:
        slices = self.planner.slices(_from_spark(start), _from_spark(end))
        return [_Range(plan) for plan in slices]

    def read(self, partition: InputPartition) -> Iterator[SliceRow]:
        assert isinstance(partition, _Range)
        return read_slice(self._spec, partition.plan)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to acknowledge: the server keeps the binlog, the checkpoint the offset."""


class BinlogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: Any) -> BinlogStreamReader:
        return BinlogStreamReader(dict(self.options))
