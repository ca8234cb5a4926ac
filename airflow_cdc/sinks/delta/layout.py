"""The layout of a Delta sink table: its columns, key and bucket width, kept in the table.

The key columns and the bucket width are stored in the table's configuration
(``airflow_cdc.key``, ``airflow_cdc.bucket_width``) so that every writer, in any process,
computes the same buckets without being told. A table is created once with the layout a
source table asks for; a later writer checks that the stored one still matches.

The stream changes a table's columns as the source's change (:mod:`.evolve`); two
more entries tell writers about that: ``airflow_cdc.dropped_columns``, the columns the
table keeps after the source dropped them (a writer without them is valid), and
``airflow_cdc.evolving``, set while the columns are being changed (writers wait).

A table of a source table without a key (``sinks.multiset.keyless``) is marked
``airflow_cdc.keyless``; its stored key ends with ``_cdc_row_hash`` and it has
``_cdc_row_hash`` and ``_cdc_count`` after the source's columns.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.schema import Schema as DeltaSchema

from airflow_cdc.errors import SinkError, TableEvolvingError
from airflow_cdc.model import TableId
from airflow_cdc.sinks.contract.cdc_columns import (
    BUCKET_COLUMN,
    CDC_PREFIX,
    CHANGE_METADATA_FIELDS,
    DELETED_COLUMN,
    OP_COLUMN,
    POSITION_COLUMN,
    POSITION_TYPE,
    SOURCE_TABLE_COLUMN,
)
from airflow_cdc.sinks.contract.naming import quote_column
from airflow_cdc.sinks.multiset.keyless import image_fields

__all__ = [
    "CONFIG_BUCKET_WIDTH",
    "CONFIG_DROPPED",
    "CONFIG_EVOLVING",
    "CONFIG_KEY",
    "CONFIG_KEYLESS",
    "CONFIG_REPLACED",
    "STATS_COLUMNS",
    "TableLayout",
    "column_differences",
    "delta_arrow_schema",
    "delta_fields",
    "layout_of",
    "plain_protocol",
    "stats_columns",
    "writable_layout",
]

log = logging.getLogger(__name__)

#: Table features a writer of plain Parquet files and their statistics honours as it is
#: (``timestampNtz``: columns of zone-less timestamps, which every DATETIME column brings).
_PLAIN_FEATURES = frozenset({"timestampNtz"})

CONFIG_KEY = "airflow_cdc.key"
#: "true" for a table of a source table without a key (a multiset of rows).
CONFIG_KEYLESS = "airflow_cdc.keyless"
CONFIG_BUCKET_WIDTH = "airflow_cdc.bucket_width"
CONFIG_DROPPED = "airflow_cdc.dropped_columns"
CONFIG_EVOLVING = "airflow_cdc.evolving"
#: The rules the table's rows were written under (``model.lake_record``).
CONFIG_LAKE_RULES = "airflow_cdc.lake_rules"
#: A routed table's sources and each one's columns (``sinks.routes.routed``), JSON.
CONFIG_ROUTE_COLUMNS = "airflow_cdc.route_columns"
#: What a replaced table was replaced for (a plan that snapshots it again).
CONFIG_REPLACED = "airflow_cdc.replaced_for"
#: Delta table property listing the columns whose min/max statistics writers collect.
STATS_COLUMNS = "delta.dataSkippingStatsColumns"
#: A checkpoint every this many commits (Delta Lake's default; delta-rs's is 100). A table
#: kept open replays the commits since its last checkpoint on every refresh and commit
#: (~0.05 ms each locally, a GET each on an object store), which a stream committing into
#: hundreds of tables per batch pays for each of them.
CHECKPOINT_INTERVAL = ("delta.checkpointInterval", "10")


@dataclass(frozen=True)
class TableLayout:
    """What a writer must know about a sink table, read from the table itself."""

    key: tuple[str, ...]
    bucket_width: int | None
    #: Arrow schema of the Delta table, ``_cdc_bucket`` included.
    schema: pa.Schema
    #: Columns kept after the source dropped them: writers may leave them out (NULL).
    dropped_columns: tuple[str, ...] = ()
    #: What the stream is changing the columns for, while it does (writers wait).
    evolving: str | None = None
    #: A multiset of rows (``sinks.multiset.keyless``): ``key`` ends with the row hash.
    keyless: bool = False
    #: The rules its rows were written under (``model.lake_record``; empty: not recorded).
    lake_rules: str = ""
    #: A routed table's sources and each one's columns (``sinks.routes.routed``).
    route_columns: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def routed(self) -> bool:
        """Whether the table holds the rows of several source tables (``sinks.routes.routed``)."""
        return SOURCE_TABLE_COLUMN in self.schema.names

    @property
    def optional_columns(self) -> tuple[str, ...]:
        """The columns a writer may leave out (NULL): those kept after the source dropped
        them; in a routed table every source column but the key (each source has its own)."""
        if self.routed:
            return tuple(n for n in self.source_columns if n not in self.key)
        return self.dropped_columns

    @property
    def change_schema(self) -> pa.Schema:
        """The columns :meth:`DeltaSink.apply` takes: everything but the bucket."""
        return pa.schema([f for f in self.schema if f.name != BUCKET_COLUMN])

    @property
    def change_metadata(self) -> bool:
        """Whether the table has the change metadata columns (``sinks.contract.cdc_columns``)."""
        return OP_COLUMN in self.schema.names

    @property
    def source_columns(self) -> list[str]:
        return [name for name in self.schema.names if not name.startswith(CDC_PREFIX)]

    @property
    def source_fields(self) -> list[pa.Field]:
        return [f for f in self.schema if not f.name.startswith(CDC_PREFIX)]

    @property
    def live_columns(self) -> list[str]:
        """The source columns the source still has (the dropped ones kept left out)."""
        return [n for n in self.source_columns if n not in self.dropped_columns]


def layout_of(dt: DeltaTable, table: TableId) -> TableLayout:
    """The layout stored in ``dt``; an error when it is no sink table."""
    config = dt.metadata().configuration
    raw_key = config.get(CONFIG_KEY)
    if raw_key is None:
        raise SinkError(
            f"the Delta table at {dt.table_uri} is not an airflow-cdc sink table of {table} "
            f"(no {CONFIG_KEY} in its configuration): move it away or choose another sink root"
        )
    width = config.get(CONFIG_BUCKET_WIDTH)
    return TableLayout(
        key=tuple(json.loads(raw_key)),
        bucket_width=int(width) if width else None,
        schema=pa.schema(dt.schema().to_arrow()),
        dropped_columns=tuple(json.loads(config.get(CONFIG_DROPPED) or "[]")),
        evolving=config.get(CONFIG_EVOLVING) or None,
        keyless=config.get(CONFIG_KEYLESS) == "true",
        lake_rules=config.get(CONFIG_LAKE_RULES) or "",
        route_columns={
            source: tuple(names)
            for source, names in json.loads(config.get(CONFIG_ROUTE_COLUMNS) or "{}").items()
        },
    )


def writable_layout(dt: DeltaTable, table: TableId) -> TableLayout:
    """:func:`layout_of` for a writer: :class:`TableEvolvingError` (a writer retries it
    like a commit conflict, ``sinks.delta.retry``) while the stream changes the table's columns."""
    layout = layout_of(dt, table)
    if layout.evolving is not None:
        raise TableEvolvingError(
            f"the stream is changing the columns of {table}'s Delta table ({layout.evolving})"
        )
    return layout


def column_differences(layout: TableLayout, wanted: pa.Schema) -> list[str]:
    """How the table's live columns differ from ``wanted`` (a writer's, as Delta holds
    them, ``_cdc_`` columns included or not); the order of columns does not count."""
    have_types = {f.name: f.type for f in layout.source_fields}
    for name in layout.dropped_columns:
        have_types.pop(name, None)
    want_types = {f.name: f.type for f in wanted if not f.name.startswith(CDC_PREFIX)}
    problems: list[str] = []
    added = [n for n in want_types if n not in have_types]
    dropped = [n for n in have_types if n not in want_types]
    changed = [
        f"{n}: {have_types[n]} -> {want_types[n]}"
        for n in want_types
        if n in have_types and have_types[n] != want_types[n]
    ]
    if added:
        problems.append(f"new columns {added}")
    if dropped:
        problems.append(f"columns gone from the source {dropped}")
    if changed:
        problems.append(f"changed types {changed}")
    return problems


def delta_fields(table: TableId, fields: list[pa.Field]) -> list[pa.Field]:
    """Source columns as Delta holds them (every column nullable, types round-tripped
    through Delta's), so they compare with a stored table's."""
    return [
        f
        for f in delta_arrow_schema(table, pa.schema(fields))
        if f.name in {g.name for g in fields}
    ]


def delta_arrow_schema(
    table: TableId, arrow_schema: pa.Schema, *, keyless: bool = False, change_metadata: bool = False
) -> pa.Schema:
    """The table schema as Delta stores it (every source column nullable: delete markers
    carry only the key; a keyless table's hash and count never NULL), round-tripped through
    Delta's types so it compares with a stored one."""
    fields = [pa.field(f.name, f.type, nullable=True) for f in arrow_schema]
    fields += image_fields() if keyless else []
    fields += [
        pa.field(POSITION_COLUMN, POSITION_TYPE, nullable=True),
        pa.field(DELETED_COLUMN, pa.bool_(), nullable=True),
        *(CHANGE_METADATA_FIELDS if change_metadata else ()),
        pa.field(BUCKET_COLUMN, pa.int64(), nullable=True),
    ]
    for f in arrow_schema:
        if pa.types.is_uint64(f.type):
            raise SinkError(
                f"column {f.name!r} of {table} is uint64, which Delta cannot hold (it has no "
                "unsigned types): map BIGINT UNSIGNED to decimal128(20, 0)"
            )
    try:
        delta = DeltaSchema.from_arrow(pa.schema(fields))
    except Exception as exc:
        raise SinkError(f"{table}: a column type has no Delta equivalent: {exc}") from exc
    return pa.schema(delta.to_arrow())


def stats_columns(schema: pa.Schema) -> str:
    """Columns that may carry file statistics: all but decimals wider than 18 digits.

    delta-rs 1.6 writes min/max statistics of such decimals clamped to 2**63 - 1 (seen
    with 1.6.6: a ``decimal(38, 0)`` of 10**22 is logged as 9223372036854775807). Readers
    and delta-rs's own merge then skip files by those wrong bounds: a MERGE on a
    ``decimal(20, 0)`` key (BIGINT UNSIGNED) above 2**63 inserted a second row for an
    existing key, and a filter on ``_cdc_position`` dropped rows. Without statistics
    for these columns every file is read, which is correct. The partition column needs none.
    """
    names = [
        f.name
        for f in schema
        if f.name != BUCKET_COLUMN and not (pa.types.is_decimal(f.type) and f.type.precision > 18)
    ]
    return ",".join(quote_column(name) for name in names)


def plain_protocol(dt: DeltaTable) -> bool:
    """Whether the table asks nothing of writers and readers beyond data files and their
    statistics (the sink creates its tables so): deletion vectors, column mapping, a change
    data feed, constraints and other features need more than Parquet files and a commit of
    them."""
    protocol = dt.protocol()
    readers = set(protocol.reader_features or ())
    writers = set(protocol.writer_features or ())
    reader_ok = protocol.min_reader_version == 1 or (
        protocol.min_reader_version == 3 and readers <= _PLAIN_FEATURES
    )
    writer_ok = protocol.min_writer_version <= 2 or (
        protocol.min_writer_version == 7 and writers <= _PLAIN_FEATURES
    )
    return reader_ok and writer_ok
