"""Tables verified one after another (each checked at its own point, ``verify.check``), with
the key ranges that would repair each (``verify.repair``), and what is recorded of it.

A table that cannot be checked (no Delta table yet, a stream that does not catch up, a type
the fingerprint cannot take) is reported with its error; the others are checked all the
same.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from airflow_cdc.config import LakeColumnsConfig, SinkConfig, SourceConfig, VerifySettings
from airflow_cdc.errors import CdcError, first_line
from airflow_cdc.metadata.verifications import Verification
from airflow_cdc.model import ChunkRange, TableId, TablePlan, TableSchema
from airflow_cdc.model.lake_columns import MaskKey, TableLakeColumns
from airflow_cdc.sinks.contract.conform import check_same_lake_rules
from airflow_cdc.sinks.contract.formats import open_sink
from airflow_cdc.source.connection import connect
from airflow_cdc.source.server import ServerInfo
from airflow_cdc.verify.check import StreamPosition, TableCheck, check_table
from airflow_cdc.verify.repair import remove_extra, repair_plan, repair_ranges

__all__ = ["TableOutcome", "verify_tables"]

log = logging.getLogger("airflow_cdc.verify")


@dataclass(frozen=True)
class TableOutcome:
    """One table's verification: its check, or the error that stopped it; the ranges a
    repair re-snapshots (when asked for)."""

    schema: TableSchema
    check: TableCheck | None = None
    error: str | None = None
    repair: tuple[ChunkRange, ...] = ()
    #: Keys only the lake had, marked deleted by the repair (a table keyed by hash).
    removed: int = 0

    @property
    def table(self) -> TableId:
        return self.schema.table

    @property
    def status(self) -> str:
        if self.check is None:
            return "failed"
        if self.check.clean:
            return "clean"
        return "repairing" if self.repair or self.removed else "differs"

    def plans(self) -> list[TablePlan]:
        return repair_plan(self.schema, self.repair)

    def summary(self) -> str:
        if self.check is None:
            return f"{self.table}: not checked: {self.error}"
        found = self.check
        head = (
            f"{self.table}: {found.rows} rows in {found.ranges} range(s), {found.passes} "
            f"pass(es) in {found.seconds:.1f} s, compared at {found.cut} (lake version "
            f"{found.lake_version})"
        )
        if found.clean:
            return f"{head}: equal to the source"
        repair = f"; {len(self.repair)} range(s) to re-snapshot" if self.repair else ""
        if self.removed:
            repair += f"; {self.removed} key(s) only in the lake marked deleted"
        return f"{head}: {found.differences.describe()}{repair}"

    def verification(self, label: str, repair_plan_id: int | None) -> Verification:
        """What the metadata DB records of it."""
        found = self.check
        return Verification(
            run_label=label,
            table=self.table,
            checked_at=dt.datetime.now(dt.UTC),
            status=self.status,
            cut=found.cut if found else None,
            rows=found.rows if found else 0,
            ranges=found.ranges if found else 0,
            passes=found.passes if found else 0,
            differences=len(found.differences.keys) if found else 0,
            keys=(found.differences.describe(shown=50) if found else self.error or ""),
            seconds=found.seconds if found else 0.0,
            notes="; ".join(found.notes) if found else "",
            repair_plan_id=repair_plan_id if self.repair else None,
        )


def verify_tables(
    source: SourceConfig,
    info: ServerInfo,
    sink: SinkConfig,
    schemas: Sequence[TableSchema],
    settings: VerifySettings,
    stream_position: StreamPosition,
    *,
    repair: bool,
    on_table: Callable[[TableOutcome], None] = lambda outcome: None,
    lake_columns: LakeColumnsConfig | None = None,
) -> list[TableOutcome]:
    """Check each table as the lake holds it (``lake_columns``: the columns left out and
    masked); with ``repair``, find the ranges that re-snapshot the keys that differ.
    ``on_table`` sees each outcome as it is known (the task logs it)."""
    rules = lake_columns or LakeColumnsConfig()
    outcomes = []
    for source_schema in schemas:
        schema = source_schema
        try:
            lake = rules.for_table(source_schema)
            schema = lake.project(source_schema)
            _check_written_alike(sink, source_schema.table, rules.record_of(lake))
            found = check_table(
                source,
                info,
                sink,
                schema,
                settings,
                stream_position,
                masks=lake.masks,
                mask_key=rules.key,
            )
        except (CdcError, ValueError) as exc:
            outcome = TableOutcome(schema, error=first_line(str(exc), type(exc).__name__))
        else:
            outcome = TableOutcome(schema, found)
            if repair and not found.clean:
                outcome = _repaired(source, sink, found, lake, rules.key)
        on_table(outcome)
        outcomes.append(outcome)
    return outcomes


def _repaired(
    source: SourceConfig,
    sink: SinkConfig,
    found: TableCheck,
    lake: TableLakeColumns,
    mask_key: MaskKey | None,
) -> TableOutcome:
    """``found``'s outcome with the ranges that re-snapshot its differing keys; of a table
    keyed by hash, the keys only the lake has marked deleted (``verify.repair``)."""
    schema = found.schema
    conn = connect(source)
    try:
        ranges = tuple(repair_ranges(conn, schema, found.differences, lake.masks, mask_key))
    finally:
        conn.close()
    removed = 0
    if lake.keyed_by_hash:
        removed = remove_extra(open_sink(sink), schema, found.differences.extra, found.cut)
    return TableOutcome(schema, found, repair=ranges, removed=removed)


def _check_written_alike(sink: SinkConfig, table: TableId, given: str) -> None:
    """:class:`ConfigurationError` when the table's lake rows were written under other
    columns or masks than verify is given (``given``: their record; it would compare rows
    of another shape)."""
    opened = open_sink(sink)
    if opened.exists(table):
        check_same_lake_rules(table, opened.shape(table).lake_rules, given)
