"""A DDL statement of a followed table as the stream carries it out (plain Python): the
statement's changes of one table taken together (:class:`Statement`), what carrying it out
needs (:class:`InOrder`) and what it left (:class:`Carried`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from airflow_cdc.config import (
    DEFAULT_CHUNK_ROWS,
    LakeColumnsConfig,
    SchemaChangeConfig,
    SourceConfig,
)
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import (
    BinlogPosition,
    ChangeEvent,
    SchemaChange,
    SchemaEvent,
    TableId,
    TableSchema,
)
from airflow_cdc.sinks.contract.base import Sink
from airflow_cdc.source.binlog.reader import BinlogItem
from airflow_cdc.stream.lake_rows import StreamLakeRows
from airflow_cdc.stream.schema_decisions import Decision

__all__ = ["Carried", "InOrder", "Statement", "statements"]


@dataclass(frozen=True)
class InOrder:
    """What applying a table in order needs: where it reads, writes and records, and how
    it reads a table's columns again (``RELOAD``, and the catalog an ``EVOLVE`` checks)."""

    stream_id: str
    source: SourceConfig
    sink: Sink
    store: MetadataStore
    load_schema: Callable[[TableId], TableSchema]
    schema_changes: SchemaChangeConfig = field(default_factory=SchemaChangeConfig)
    #: Rows per chunk of the plans the stream makes (a replacement, a table read again).
    chunk_rows: int = DEFAULT_CHUNK_ROWS
    #: Whether the stream follows a table (its tables and patterns): a table renamed to
    #: such a name carries on under it.
    follows: Callable[[TableId], bool] = lambda _: False
    #: What of the tables' columns reaches the lake.
    lake_columns: LakeColumnsConfig = field(default_factory=LakeColumnsConfig)

    @functools.cached_property
    def to_lake(self) -> StreamLakeRows:
        """A table's rows as the lake holds them (``lake_columns``)."""
        return StreamLakeRows(self.lake_columns)


@dataclass(frozen=True)
class Carried:
    """A statement carried out: the decision, and the table's columns from it on (None: the
    table was dropped, or is being replaced)."""

    decision: Decision
    schema: TableSchema | None


@dataclass(frozen=True)
class Statement:
    """One DDL statement's changes of one table (several for ``ALTER TABLE t ADD a, DROP
    b``), at its position."""

    events: tuple[SchemaEvent, ...]

    @property
    def position(self) -> BinlogPosition:
        return self.events[0].position

    @property
    def table(self) -> TableId:
        return self.events[0].table

    @property
    def event_time(self) -> int:
        """The statement's binlog time (seconds; 0: not known)."""
        return self.events[0].event_time

    @property
    def text(self) -> str:
        return self.events[0].statement.strip()

    @property
    def changes(self) -> list[SchemaChange]:
        return [event.change for event in self.events]


def statements(items: Iterable[BinlogItem]) -> Iterator[ChangeEvent | Statement]:
    """``items`` with each statement's schema events of one table taken together (they
    follow each other, at one position)."""
    group: list[SchemaEvent] = []
    for item in items:
        if group and not (
            isinstance(item, SchemaEvent)
            and item.position == group[0].position
            and item.table == group[0].table
        ):
            yield Statement(tuple(group))
            group = []
        if isinstance(item, SchemaEvent):
            group.append(item)
        else:
            yield item
    if group:
        yield Statement(tuple(group))
