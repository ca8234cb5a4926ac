"""What every sink shares: the bookkeeping columns, the result of a write, the interface.

A sink row holds one version of a source row plus three columns that make concurrent,
repeated and out-of-order writes converge (``sinks.contract.last_writer_wins``):

* ``_cdc_position``: the encoded binlog position of the version held
  (:meth:`airflow_cdc.model.BinlogPosition.encode`, Arrow ``decimal128(38, 0)``). A write
  replaces a row only if its position is greater, so the order of writers does not matter.
* ``_cdc_deleted``: ``true`` for a delete marker (tombstone). Markers stay in the table so
  that an older snapshot row or a replayed older event cannot bring the key back.
* ``_cdc_bucket``: a partition column computed by the sink from the first key column, so
  that writers of different key ranges touch different files and do not conflict. The
  sink's own device (the Delta sink's): no caller writes or reads it, and a format that
  needs no partitions may go without it.

A table may also have the change metadata columns (``sinks.contract.cdc_columns``: ``_cdc_op``, the
operation that wrote the version held, and ``_cdc_commit_ts``, its binlog time), created
with ``change_metadata``. Every writer's rows carry them; a table without them drops them.

A table that routes merge (``model.routes``, made with ``TableOptions.routed``) holds the
rows of several source tables and has ``_cdc_source_table``, the source table's name,
which joins its key unless the routes say the keys are unique; ``sinks.routes.routed`` writes and
reads it for each source table apart.

The prefix ``_cdc_`` is reserved for these; Iceberg's metadata column names are refused
too so a table can later move to Iceberg without renaming.

A source table without a key (``TableSchema.keyless``) is held as a multiset of rows
(``sinks.multiset.keyless``): one sink row per distinct row image, with two more columns after the
source's, ``_cdc_row_hash`` (the image's 16-byte hash, ``sinks.multiset.row_hash``) and
``_cdc_count`` (how many source rows have the image; 0 on a delete marker). Its *stored
key*, which every method below means by "key", is ``(*schema.key, "_cdc_row_hash")``: the
chunking column, if the table has one, then the hash. A writer writes absolute counts at
its position, so last writer wins per stored key as for a keyed table. :meth:`Sink.shape`
and :meth:`Sink.candidates` give the stored key; :meth:`Sink.read_live` gives the source's
rows (each image repeated by its count), :meth:`Sink.read_all` the rows as stored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import pyarrow as pa
import pyarrow.dataset as ds

from airflow_cdc.errors import SinkError
from airflow_cdc.model import (
    BinlogPosition,
    ChunkRange,
    RowFilter,
    TableId,
    TableOptions,
    TableSchema,
)
from airflow_cdc.sinks.contract.cdc_columns import (
    CDC_COLUMNS,
    CDC_PREFIX,
    ICEBERG_RESERVED,
    LIVE_ROWS_PREDICATE,
)

if TYPE_CHECKING:
    from airflow_cdc.config import StreamBounds
    from airflow_cdc.runner import Runner
    from airflow_cdc.sinks.contract.change_batches import BatchWrite, Merged, TableChanges
    from airflow_cdc.sinks.contract.columns_change import ColumnsChange

__all__ = [
    "NO_OPTIONS",
    "ApplyResult",
    "RangeWriter",
    "Sink",
    "TableScan",
    "TableShape",
    "WrittenFile",
    "check_column_names",
    "live_rows_sql",
]


#: A table asked for with every option at its default.
NO_OPTIONS = TableOptions()


def check_column_names(table: TableId | str, names: Iterable[str]) -> None:
    """Refuse source columns that collide with the sink's own or a table format's columns.

    The check is case-insensitive because Spark and Iceberg resolve names without case.
    """
    for name in names:
        folded = name.lower()
        if folded.startswith(CDC_PREFIX):
            raise SinkError(
                f"column {name!r} of {table} starts with {CDC_PREFIX!r}, which the sink reserves "
                f"for {', '.join(CDC_COLUMNS)}: rename the column in the source (or leave the "
                "table out of the CDC set)"
            )
        if folded in ICEBERG_RESERVED:
            raise SinkError(
                f"column {name!r} of {table} is a name Iceberg reserves "
                f"({', '.join(sorted(ICEBERG_RESERVED))}): rename the column in the source "
                "(or leave the table out of the CDC set)"
            )


def live_rows_sql(table_ref: str, columns: Sequence[str]) -> str:
    """A ``SELECT`` giving the live rows of a sink table, for engines other than this package.

    Readers outside airflow-cdc (Spark SQL, Trino, DuckDB, DataFusion) see delete markers
    and the ``_cdc_`` columns; they must filter ``_cdc_deleted = false`` and drop the
    ``_cdc_`` columns, e.g. in a view. ``table_ref`` is pasted as given (the engine's own
    table reference); column names are quoted with backticks (Spark / Databricks /
    DataFusion-with-MySQL-dialect style) with inner backticks doubled. Use it to create a
    view, never with names a user typed.
    """
    if not columns:
        raise ValueError("live_rows_sql needs at least one column")
    quoted = ", ".join("`" + name.replace("`", "``") + "`" for name in columns)
    return f"SELECT {quoted} FROM {table_ref} WHERE {LIVE_ROWS_PREDICATE}"  # noqa: S608


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """What one :meth:`Sink.apply` did.

    ``skipped_older`` counts input rows that lost to a row already in the sink with an equal
    or greater position (a replay, or an older writer arriving late). ``attempts`` counts
    merge attempts (more than one after commit conflicts). ``version`` is the table version
    after the write (unchanged when nothing was written). ``replayed`` is true when the
    batch was skipped whole because the table already recorded its application transaction.
    """

    rows_in: int
    inserted: int
    updated: int
    skipped_older: int
    attempts: int
    version: int
    replayed: bool = False


@dataclass(frozen=True, slots=True)
class TableShape:
    """A sink table's source columns (those it holds now, in order), its key, and the
    rules its rows were written under (``model.lake_record``; empty: not recorded)."""

    columns: tuple[str, ...]
    key: tuple[str, ...]
    lake_rules: str = ""
    #: Of a routed table (``sinks.routes.routed``): each source's own columns.
    sources: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class TableScan:
    """One version of a sink table, for an engine that reads it whole (``verify``): every
    row with the ``_cdc_`` columns as an Arrow dataset, and, when the version is plain
    Parquet files on this machine, their paths (an engine's own Parquet reader is faster)."""

    version: int
    dataset: ds.Dataset
    local_files: tuple[str, ...] | None = None


class WrittenFile(Protocol):
    """A data file a :class:`RangeWriter` wrote, not committed yet."""

    @property
    def rows(self) -> int: ...


class RangeWriter(Protocol):
    """Writes the rows of a key range as the sink's data files, on any worker (it pickles);
    the driver then commits them all at once (:meth:`Sink.commit_new_range`)."""

    def write(self, rows: pa.Table) -> Sequence[WrittenFile]:
        """Write ``rows`` (source columns in the sink's types, a keyless table's
        ``_cdc_row_hash`` and ``_cdc_count``, ``_cdc_position``, ``_cdc_deleted``; one per
        key); the files, not committed."""
        ...


@runtime_checkable
class Sink(Protocol):
    """Where change rows land. Writes are idempotent and order-independent (last writer wins
    by ``_cdc_position``), so every writer may retry and run concurrently with the others."""

    def ensure_table(
        self, schema: TableSchema, arrow_schema: pa.Schema, options: TableOptions = NO_OPTIONS
    ) -> None:
        """Create the table if missing; fail if an existing table has another schema, or
        is keyed where ``schema`` is keyless or the other way round. A keyless ``schema``
        gets the stored key, hash and count of the module docstring. ``options``: with
        ``change_metadata`` the table has the change metadata columns (added to an
        existing table without them, its rows' null; a keyless table never has them);
        ``lake_rules`` (``LakeColumnsConfig.table_options``) are recorded by a new table,
        and :class:`~airflow_cdc.errors.ConfigurationError` raised when the table recorded
        others (``sinks.contract.conform.check_same_lake_rules``)."""
        ...

    def apply(
        self,
        table: TableId,
        changes: pa.Table | pa.RecordBatchReader,
        *,
        app_id: str | None = None,
        app_version: int | None = None,
        keys_unique: bool = False,
        wins_ties: bool = False,
    ) -> ApplyResult:
        """Merge rows (source columns + ``_cdc_position`` + ``_cdc_deleted``, at most one per
        key; a keyless table's with ``_cdc_row_hash`` and an absolute ``_cdc_count``, 0
        exactly on markers) into the table; a row replaces the held one only if its
        position is greater (with ``wins_ties``, a snapshot chunk's rows: or equal,
        ``sinks.contract.last_writer_wins``).
        ``keys_unique``: the caller guarantees one row per key, so the check is skipped."""
        ...

    def truncate(
        self,
        table: TableId,
        position: BinlogPosition,
        *,
        app_id: str | None = None,
        app_version: int | None = None,
        rows: RowFilter | None = None,
        event_time: int = 0,
    ) -> int:
        """A source ``TRUNCATE TABLE`` at ``position`` (of the rows ``rows`` selects, if
        given: a partition's; ``event_time``: its binlog time, seconds): every such live
        row older than it becomes a delete marker at it (as a delete would leave it; count 0
        in a keyless table); newer rows and markers stay. Idempotent; returns the rows
        turned into markers."""
        ...

    def evolve(self, table: TableId, change: ColumnsChange, ordinal: int = 0) -> bool:
        """Change the table's columns as the source's changed at ``change.position``
        (``sinks.contract.columns_change``; ``ordinal``: the change's place among its statement's
        changes of the table). Idempotent: False when the table held the change. A
        keyless table's columns are not changed in place: :class:`SinkError` (it needs a
        new snapshot)."""
        ...

    def replace_table(
        self,
        schema: TableSchema,
        arrow_schema: pa.Schema,
        options: TableOptions,
        *,
        replaced_for: str,
    ) -> bool:
        """Start a new generation of the table, empty, with ``schema``'s columns and key,
        for ``replaced_for`` (a plan that snapshots it again): its writers write it, its
        readers keep the current rows until :meth:`promote`; False when there is one for
        it already (no table yet: the table is created). Meanwhile the writers' methods
        (:meth:`ensure_table`'s check, :meth:`apply`, :meth:`truncate`, :meth:`evolve`,
        :meth:`range_writer`, :meth:`commit_new_range`) and what writers ask
        (:meth:`shape`, :meth:`candidates`, :meth:`applied_version`) are the new
        generation's; :meth:`read_live`, :meth:`read_all` and :meth:`scan` the current
        table's. The new generation takes ``options`` as :meth:`ensure_table` does (a
        replacement is how a table's rules change)."""
        ...

    def promote(self, table: TableId, replaced_for: str) -> bool:
        """Put the table's new generation for ``replaced_for`` in its place, in one commit
        readers see at once; False when it has none. Idempotent."""
        ...

    def copy_table(self, source: TableId, target: TableId, origin: str) -> bool:
        """Copy ``source``'s table to ``target``'s place (a source ``RENAME TABLE``), marked
        with ``origin``; False, copying nothing, when another table is there."""
        ...

    def merge_on_executors(
        self,
        tables: Sequence[TableChanges],
        batch: BatchWrite,
        runner: Runner,
        cores: int,
        bounds: StreamBounds,
    ) -> tuple[list[Merged], int]:
        """Merge a batch's tables as tasks of ``runner`` (``cores`` of them), each table as
        :func:`~airflow_cdc.sinks.contract.table_merge.merge_changes` would; each table's
        outcome (never raises), and the number of tasks run. ``batch.staging`` is this
        sink's configuration: a task in another process may open the sink from it."""
        ...

    def range_writer(self, table: TableId) -> RangeWriter:
        """A writer of the table's data files for :meth:`commit_new_range`."""
        ...

    def commit_new_range(
        self,
        table: TableId,
        files: Sequence[WrittenFile],
        rng: ChunkRange,
        writer: RangeWriter,
        *,
        source: str | None = None,
    ) -> bool:
        """Commit ``files`` (the rows of ``rng`` written by ``writer``) in one commit if
        the table holds no row that may lie in ``rng`` (with ``source``: no such row of
        that source table, in a table that routes merge and whose key holds the source);
        False, committing nothing, when it may.
        :class:`~airflow_cdc.errors.SinkColumnsChangedError` when the table's columns
        changed since the writer was made."""
        ...

    def remove_files(self, table: TableId, files: Sequence[WrittenFile]) -> None:
        """Delete written files that were not committed."""
        ...

    def exists(self, table: TableId) -> bool:
        """Whether the table is there."""
        ...

    def shape(self, table: TableId) -> TableShape:
        """The table's columns and key, as the sink holds them (a keyless table's stored
        key)."""
        ...

    def table_uri(self, table: TableId) -> str:
        """Where the table lives (for messages and readers outside the product)."""
        ...

    def scan(self, table: TableId) -> TableScan:
        """The table's current version, to be read whole by another engine."""
        ...

    def applied_version(self, table: TableId, app_id: str) -> int | None:
        """The last ``app_version`` that :meth:`apply` recorded for ``app_id``, if any."""
        ...

    def candidates(self, table: TableId, rng: ChunkRange, below: int) -> pa.Table:
        """Key columns + position + deleted flag of sink rows that may lie in ``rng`` and
        whose position is less than ``below`` (a superset is allowed). A keyless table's:
        its stored key, the hash as ``HASH_TYPE``; ``rng`` is a range of its chunking
        column."""
        ...

    def counts_of(self, table: TableId, hashes: pa.Array) -> pa.Table:
        """Of a keyless table: ``_cdc_row_hash``, ``_cdc_count`` and ``_cdc_position`` of
        the rows holding the images ``hashes`` (markers included), as writers see it."""
        ...

    def read_live(self, table: TableId, columns: Sequence[str] | None = None) -> pa.Table:
        """Current rows, without delete markers and without the ``_cdc_`` columns; a keyless
        table's as the source holds them (each image ``_cdc_count`` times)."""
        ...

    def read_all(self, table: TableId) -> pa.Table:
        """Every row including markers and ``_cdc_`` columns (tests, operations)."""
        ...
