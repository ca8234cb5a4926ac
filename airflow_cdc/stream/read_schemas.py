"""The columns each table of the stream is read with, and how each differs from its sink
table's.

A table is read with the schema history's columns at the batch's start
(``stream.known_columns``), else the catalog's. A schema loaded after an ALTER the stream
did not see (it loaded the table after it: a restart, a join) matches the new row images
but not the sink table; so each schema is compared with the sink table's own columns and
key once, when kept (``source.schema_check.sink_drift``), and the batch writer replaces
a table that drifted (``stream.carry_out.replace_unexplained``).

The stream takes every table from the catalog through :func:`followable_schemas`; a table
without a key gets its chunking column there, as a plan gives it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from airflow_cdc.config import LakeColumnsConfig, SourceConfig
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import BinlogPosition, TableId, TableSchema
from airflow_cdc.planning.plan_snapshot import chunked_schemas
from airflow_cdc.sinks.contract.base import Sink
from airflow_cdc.sinks.contract.conform import check_same_lake_rules
from airflow_cdc.sinks.multiset.keyless import stored_key
from airflow_cdc.source.catalog import load_table_schemas
from airflow_cdc.source.connection import DbConnection, on_server
from airflow_cdc.source.schema_check import Drift, sink_drift
from airflow_cdc.stream.known_columns import KnownColumns

__all__ = ["ReadSchemas", "followable_schemas"]


def followable_schemas(
    conn: DbConnection,
    tables: Sequence[TableId],
    chunk_keys: Mapping[TableId, Sequence[str]] | None = None,
) -> list[TableSchema]:
    """The catalog's schemas of ``tables`` (``load_table_schemas``) for the stream, a
    table without a key with the chunking column a plan gives it (``planning.
    plan_snapshot.chunked_schemas``: the one its snapshot's chunks and Delta table have,
    unless its indexes changed since, which the sink's key then shows as drift)."""
    return chunked_schemas(conn, load_table_schemas(conn, tables, chunk_keys))


class ReadSchemas:
    """The schemas of the tables the stream reads, kept between batches."""

    def __init__(
        self, sink: Sink, source: SourceConfig, lake_columns: LakeColumnsConfig | None = None
    ) -> None:
        self._sink = sink
        self._source = source
        self._lake = lake_columns or LakeColumnsConfig()
        self._schemas: dict[TableId, TableSchema] = {}
        self._drift: dict[TableId, Drift] = {}
        self._known = KnownColumns()

    def __contains__(self, table: object) -> bool:
        return table in self._schemas

    def __getitem__(self, table: TableId) -> TableSchema:
        return self._schemas[table]

    def __iter__(self) -> Iterator[TableId]:
        return iter(list(self._schemas))

    def drift(self, table: TableId) -> Drift:
        """How the table's schema differs from its sink table's (empty: it does not)."""
        return self._drift.get(table, Drift())

    def keep(self, table: TableId, schema: TableSchema) -> None:
        """Read ``table`` with ``schema`` from now on, compared with its sink table."""
        self._schemas[table] = schema
        if self._sink.exists(table):
            shape = self._sink.shape(table)
            # Rows shaped by other columns or masks than the table's: refused, named.
            lake = self._lake.for_table(schema)
            check_same_lake_rules(table, shape.lake_rules, self._lake.record_of(lake))
            # The sink merges a keyless table by its chunking column and row hash: the
            # same key as the schema's when its stored key is what the schema asks for.
            key = schema.key if shape.key == stored_key(schema) else shape.key
            # Against the lake's columns: those left out are not the sink's to hold.
            self._drift[table] = sink_drift(shape.columns, key, lake.project(schema))
        else:
            self._drift[table] = Drift()

    def forget(self, table: TableId) -> None:
        self._schemas.pop(table, None)
        self._drift.pop(table, None)

    def from_history(
        self, store: MetadataStore, tables: Sequence[TableId], position: BinlogPosition
    ) -> None:
        """The recorded columns of ``tables`` at ``position``, kept where they changed."""
        for table, schema in self._known.at(store, tables, position).items():
            if self._schemas.get(table) != schema:
                self.keep(table, schema)

    def load_missing(self, tables: Sequence[TableId]) -> None:
        """The catalog's schemas of those of ``tables`` not kept yet (two queries for all)."""
        missing = [t for t in tables if t not in self._schemas]
        if not missing:
            return
        loaded = on_server(
            self._source,
            lambda conn: followable_schemas(conn, missing),
            what="loading table schemas",
        )
        for table, schema in zip(missing, loaded, strict=True):
            self.keep(table, schema)

    def reload(self, table: TableId) -> TableSchema:
        """The table's schema from the catalog now (not kept)."""
        (schema,) = on_server(
            self._source,
            lambda conn: followable_schemas(conn, [table]),
            what=f"reading the columns of {table} again",
        )
        return schema
