"""The embedded default sink: one Delta Lake table per source table, written with delta-rs.

Layout: ``<root>/<database>/<table>`` (names escaped by :mod:`.naming`), source columns
plus ``_cdc_position``, ``_cdc_deleted`` and the partition column ``_cdc_bucket``. The key
columns and the bucket width are stored in the table's configuration
(``airflow_cdc.key``, ``airflow_cdc.bucket_width``) so that every writer, in any process,
computes the same buckets without being told.

Writes are one conditional MERGE per batch (last writer wins by ``_cdc_position``). The
merge predicate names the batch's buckets as literals, which delta-rs records as the
commit's read predicate: its conflict checker then lets concurrent merges into other
buckets commit, and retries (see :mod:`.retry`) settle merges into the same bucket.

A key range the table holds no row of can instead take data files written elsewhere
(:mod:`.delta_files`) in one plain commit, :meth:`DeltaSink.commit_new_range`: no merge,
so a chunk's executors encode its Parquet in parallel. A blind append would not see a
writer that put rows into the range since the emptiness check, so every commit names the
buckets it writes as Delta application transactions (``airflow-cdc.bucket.<n>``); delta-rs
fails a commit whose application ids a concurrent commit also wrote, and the retry checks
the range again (then it merges).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.exceptions import DeltaError, TableNotFoundError
from deltalake.schema import Schema as DeltaSchema
from deltalake.transaction import AddAction, RemoveAction

from airflow_cdc.config import SinkConfig
from airflow_cdc.errors import SinkError
from airflow_cdc.model import ChunkRange, TableId, TableSchema
from airflow_cdc.sinks.base import (
    BUCKET_COLUMN,
    CDC_PREFIX,
    DELETED_COLUMN,
    POSITION_COLUMN,
    POSITION_TYPE,
    ApplyResult,
    check_column_names,
)
from airflow_cdc.sinks.buckets import bucket_of, bucket_values, check_bucket_width
from airflow_cdc.sinks.delta_files import DataFile, remove_data_files
from airflow_cdc.sinks.delta_rewrite import (
    Rewrite,
    RewriteLimits,
    plan_rewrite,
    rewrite_actions,
)
from airflow_cdc.sinks.last_writer_wins import newer_than_target
from airflow_cdc.sinks.naming import escape_segment, quote_column
from airflow_cdc.sinks.retry import RetryPolicy, retry_conflicts
from airflow_cdc.sinks.storage import Location

__all__ = ["CONFIG_BUCKET_WIDTH", "CONFIG_KEY", "STATS_COLUMNS", "DeltaSink", "TableLayout"]

log = logging.getLogger(__name__)

CONFIG_KEY = "airflow_cdc.key"
CONFIG_BUCKET_WIDTH = "airflow_cdc.bucket_width"
#: Delta table property listing the columns whose min/max statistics writers collect.
STATS_COLUMNS = "delta.dataSkippingStatsColumns"
#: Above this many distinct buckets in one batch, the merge names a bucket range instead
#: of a list (a shorter predicate; concurrent writers inside the range then retry).
_MAX_BUCKET_LIST = 512


@dataclass(frozen=True)
class TableLayout:
    """What a writer must know about a sink table, read from the table itself."""

    key: tuple[str, ...]
    bucket_width: int | None
    #: Arrow schema of the Delta table, ``_cdc_bucket`` included.
    schema: pa.Schema

    @property
    def change_schema(self) -> pa.Schema:
        """The columns :meth:`DeltaSink.apply` takes: everything but the bucket."""
        return pa.schema([f for f in self.schema if f.name != BUCKET_COLUMN])

    @property
    def source_columns(self) -> list[str]:
        return [name for name in self.schema.names if not name.startswith(CDC_PREFIX)]


class DeltaSink:
    """Delta Lake tables under ``root`` (a local folder or an object-store URI)."""

    def __init__(
        self,
        root: str,
        *,
        storage_options: dict[str, str] | None = None,
        retry: RetryPolicy | None = None,
        streamed_exec: bool = False,
        rewrite: RewriteLimits | None = None,
        keep_open: bool = False,
    ) -> None:
        if not root:
            raise SinkError("the sink root is empty: give a folder or URI for the Delta tables")
        self.root = root.rstrip("/") or "/"
        self.storage_options = dict(storage_options) if storage_options else None
        self.retry = retry or RetryPolicy()
        #: delta-rs ``streamed_exec``: False (default) lets delta-rs also prune the target
        #: by the source's key statistics; True streams the source (less memory).
        self.streamed_exec = streamed_exec
        #: Up to these sizes apply() rewrites the touched files itself (``delta_rewrite``);
        #: None: always a delta-rs MERGE. The rewrite's commit carries no read predicate, so
        #: delta-rs fails it when a concurrent commit removed any file of the table (the
        #: MERGE names its buckets): the stream, most often the table's only writer, takes
        #: it; chunk jobs, which run side by side on disjoint buckets, keep the MERGE.
        self.rewrite = rewrite
        #: Keep each table open between calls and read only its new commits (a writer that
        #: applies to the same tables again and again: the stream).
        self._open_tables: dict[TableId, DeltaTable] | None = {} if keep_open else None
        #: The last version this writer recorded per (table, application id).
        self._recorded: dict[tuple[TableId, str], int] = {}

    @classmethod
    def of(cls, config: SinkConfig, **kwargs: Any) -> DeltaSink:
        """The sink ``config`` describes (its root and storage options)."""
        return cls(config.root, storage_options=dict(config.storage_options), **kwargs)

    def __repr__(self) -> str:
        return f"DeltaSink({self.root!r})"

    # -- paths and tables ---------------------------------------------------------------

    def table_uri(self, table: TableId) -> str:
        """Where ``table`` lives: ``<root>/<escaped database>/<escaped table>``."""
        return f"{self.root}/{escape_segment(table.database)}/{escape_segment(table.table)}"

    def table_location(self, table: TableId) -> Location:
        """:meth:`table_uri` with the sink's storage options, for writing files into it."""
        return Location(self.table_uri(table), self.storage_options or {})

    def exists(self, table: TableId) -> bool:
        return DeltaTable.is_deltatable(self.table_uri(table), self.storage_options)

    def _open(self, table: TableId) -> DeltaTable:
        try:
            return DeltaTable(self.table_uri(table), storage_options=self.storage_options)
        except TableNotFoundError as exc:
            raise SinkError(
                f"sink table for {table} does not exist at {self.table_uri(table)}: "
                "run the snapshot plan for it first (it creates the table)"
            ) from exc

    def layout(self, table: TableId) -> TableLayout:
        dt = self._take_open(table)
        layout = _layout_of(dt, table)
        self._keep_open(table, dt)
        return layout

    # -- create -------------------------------------------------------------------------

    def ensure_table(
        self, schema: TableSchema, arrow_schema: pa.Schema, *, bucket_width: int | None = None
    ) -> None:
        """Create the table if it is missing, else check that it has the requested layout.

        Safe when several processes call it at once: the loser of the creation race opens
        the winner's table and checks it. ``bucket_width`` applies only when the first key
        column is an integer; other tables keep every row in bucket 0. The width is fixed
        when the table is created: a later call with another width keeps the stored one.
        """
        table = schema.table
        check_column_names(table, arrow_schema.names)
        folded = [name.lower() for name in arrow_schema.names]
        if len(set(folded)) != len(folded):
            raise SinkError(f"{table} has columns whose names differ only in case: {folded}")
        missing = [name for name in schema.key if name not in arrow_schema.names]
        if not schema.key or missing:
            raise SinkError(f"key columns {missing or '(none)'} of {table} are not in its schema")
        first = schema.key_columns[0]
        width = bucket_width if first.is_integer else None
        if bucket_width is not None and width is None:
            log.info("%s: key %r is not an integer; every row goes to bucket 0", table, first.name)
        if width is not None:
            check_bucket_width(width, arrow_schema.field(first.name).type, first.name)
        wanted = _delta_arrow_schema(table, arrow_schema)
        config = {
            CONFIG_KEY: json.dumps(list(schema.key)),
            STATS_COLUMNS: _stats_columns(wanted),
        }
        if width is not None:
            config[CONFIG_BUCKET_WIDTH] = str(width)
        uri = self.table_uri(table)
        if not self.exists(table):
            try:
                DeltaTable.create(
                    uri,
                    wanted,
                    mode="error",
                    partition_by=[BUCKET_COLUMN],
                    name=str(table),
                    description=f"airflow-cdc sink of {table}",
                    configuration=config,
                    storage_options=self.storage_options,
                    raise_if_key_not_exists=False,
                )
                log.info("created sink table %s at %s", table, uri)
                return
            except DeltaError:
                if not self.exists(table):
                    raise
                log.info("%s was created concurrently; checking its layout", table)
        existing = self._open(table)
        _check_same_layout(table, existing, wanted, config)

    # -- write --------------------------------------------------------------------------

    def apply(
        self,
        table: TableId,
        changes: pa.Table | pa.RecordBatchReader,
        *,
        app_id: str | None = None,
        app_version: int | None = None,
        keys_unique: bool = False,
    ) -> ApplyResult:
        """Merge ``changes`` into the table; the greater ``_cdc_position`` wins per key.

        ``changes`` has the table's source columns, ``_cdc_position`` and ``_cdc_deleted``
        (a delete marker may leave the other columns null) and at most one row per key.
        A reader is read whole first: a commit conflict re-runs the merge, which needs the
        input again, and the duplicate-key check needs every key.

        ``keys_unique=True`` skips the duplicate-key check (a group-by over every key, 0.2 s
        per million rows) for callers whose rows are unique by construction.

        With ``app_id``/``app_version`` the commit records a Delta application transaction
        and a batch whose version the table already holds for that app is skipped whole.
        """
        if (app_id is None) != (app_version is None):
            raise SinkError("give app_id and app_version together (or neither)")
        dt = self._take_open(table)
        layout = _layout_of(dt, table)
        if isinstance(changes, pa.RecordBatchReader):
            changes = changes.read_all()
        source = _prepare_changes(table, layout, changes, check_keys=not keys_unique)
        rows_in = source.num_rows
        buckets = pc.unique(source.column(BUCKET_COLUMN)).to_pylist() if rows_in else []
        own = (
            [Transaction(app_id, app_version)]
            if app_id is not None and app_version is not None
            else []
        )
        predicate = _merge_predicate(layout, buckets)
        updates = {quote_column(name): quote_column(name, "s") for name in source.column_names}
        what = f"apply {rows_in} rows to {table}"

        # The first attempt merges into the version just opened (an open replays the log:
        # ~3 ms locally, a listing and reads on an object store); a retry after a commit
        # conflict opens the table again.
        fresh = [dt]
        location = self.table_location(table)
        latest = [dt]

        def attempt() -> ApplyResult:
            current = fresh.pop() if fresh else self._open(table)
            latest[0] = current
            commit = CommitProperties(
                app_transactions=own + _bucket_transactions(buckets, current.version())
            )
            if app_id is not None and app_version is not None:
                held = self._held_version(current, table, app_id, app_version)
                if held is not None and held >= app_version:
                    return ApplyResult(rows_in, 0, 0, 0, 0, current.version(), replayed=True)
            rewrite = (
                plan_rewrite(current, location, source, layout.key, self.rewrite)
                if rows_in and self.rewrite is not None
                else None
            )
            if rewrite is not None:
                return self._commit_rewrite(current, location, layout, rewrite, commit, bool(own))
            before = current.version()
            inserted = updated = 0
            if rows_in:
                metrics = (
                    current.merge(
                        source,
                        predicate=predicate,
                        source_alias="s",
                        target_alias="t",
                        streamed_exec=self.streamed_exec,
                        commit_properties=commit,
                    )
                    .when_matched_update(updates, predicate=newer_than_target("s", "t"))
                    .when_not_matched_insert(updates)
                    .execute()
                )
                inserted = int(metrics["num_target_rows_inserted"])
                updated = int(metrics["num_target_rows_updated"])
            if own and current.version() == before:
                # delta-rs commits nothing when a merge changes no row, which would drop the
                # application transaction; record it in an empty commit instead.
                current.create_write_transaction(
                    [],
                    mode="append",
                    schema=current.schema(),
                    partition_by=[BUCKET_COLUMN],
                    commit_properties=commit,
                )
            skipped = rows_in - inserted - updated
            return ApplyResult(rows_in, inserted, updated, skipped, 0, current.version())

        result, attempts = retry_conflicts(attempt, what, self.retry)
        self._keep_open(table, latest[0])
        if app_id is not None and app_version is not None:
            self._recorded[(table, app_id)] = app_version
        return ApplyResult(
            result.rows_in,
            result.inserted,
            result.updated,
            result.skipped_older,
            attempts,
            result.version,
            result.replayed,
        )

    def _commit_rewrite(
        self,
        dt: DeltaTable,
        location: Location,
        layout: TableLayout,
        rewrite: Rewrite,
        commit: CommitProperties,
        record: bool,
    ) -> ApplyResult:
        """Commit a small merge done in Arrow (``delta_rewrite``); with ``record``, an empty
        commit when nothing changed, for the application transaction."""
        files, actions = rewrite_actions(
            location, rewrite, layout.change_schema, layout.key, layout.bucket_width
        )
        if actions or record:
            try:
                dt.create_write_transaction(
                    actions,
                    mode="append",
                    schema=dt.schema(),
                    partition_by=[BUCKET_COLUMN],
                    commit_properties=commit,
                )
            except BaseException:
                remove_data_files(location, files)
                raise
            dt.update_incremental()
        applied = rewrite.applied
        rows_in = applied.inserted + applied.updated + applied.skipped
        return ApplyResult(
            rows_in, applied.inserted, applied.updated, applied.skipped, 0, dt.version()
        )

    def _take_open(self, table: TableId) -> DeltaTable:
        """The table, from those kept open (brought up to date) if it is there; whoever
        takes it holds it alone until :meth:`_keep_open` puts it back."""
        kept = self._open_tables.pop(table, None) if self._open_tables is not None else None
        if kept is None:
            return self._open(table)
        kept.update_incremental()
        return kept

    def _keep_open(self, table: TableId, dt: DeltaTable) -> None:
        if self._open_tables is not None:
            self._open_tables[table] = dt

    def _held_version(
        self, dt: DeltaTable, table: TableId, app_id: str, version: int
    ) -> int | None:
        """The version ``app_id`` recorded in the table, as far as it decides whether
        ``version`` is held: a writer keeping tables open remembers what it recorded (one
        writer per app id: the stream's lease) and reads the log (~1.6 ms) only when that
        does not settle it. A remembered value is never above the table's, so at worst a
        held batch is applied again, which last writer wins makes a no-op."""
        if self._open_tables is not None:
            known = self._recorded.get((table, app_id))
            if known is not None and known < version:
                return known
        held = dt.transaction_version(app_id)
        return None if held is None else int(held)

    def commit_new_range(self, table: TableId, files: Sequence[DataFile], rng: ChunkRange) -> bool:
        """Commit ``files`` (the rows of ``rng``, one per key, written by
        :func:`~airflow_cdc.sinks.delta_files.write_data_files`) as one append, if the table
        holds no row that may lie in ``rng``. False, committing nothing, when it may: the
        caller then merges the rows. See the module docstring for concurrent writers."""
        what = f"commit {len(files)} data files of {table} {rng.label()}"

        def attempt() -> bool:
            current = self._open(table)
            layout = _layout_of(current, table)
            if self._range_rows(current, layout, rng, below=None).num_rows:
                return False
            stamp = int(time.time() * 1000)
            adds: list[AddAction | RemoveAction] = [
                AddAction(f.path, f.size, {BUCKET_COLUMN: str(f.bucket)}, stamp, True, f.stats)
                for f in files
            ]
            buckets = sorted({f.bucket for f in files})
            current.create_write_transaction(
                adds,
                mode="append",
                schema=current.schema(),
                partition_by=[BUCKET_COLUMN],
                commit_properties=CommitProperties(
                    app_transactions=_bucket_transactions(buckets, current.version())
                ),
            )
            return True

        committed, _ = retry_conflicts(attempt, what, self.retry)
        return committed

    def remove_files(self, table: TableId, files: Sequence[DataFile]) -> None:
        """Delete written data files that were not committed."""
        remove_data_files(self.table_location(table), files)

    def applied_version(self, table: TableId, app_id: str) -> int | None:
        """The last version ``app_id`` recorded in ``table`` with :meth:`apply`, if any."""
        version = self._open(table).transaction_version(app_id)
        return None if version is None else int(version)

    # -- read ---------------------------------------------------------------------------

    def candidates(self, table: TableId, rng: ChunkRange, below: int) -> pa.Table:
        """Key columns, ``_cdc_position`` and ``_cdc_deleted`` of sink rows that may lie in
        ``rng`` and hold a position less than ``below``.

        A superset: only the first key column is filtered (its bounds inclusive), and only
        when it is an integer, because other types may order differently on the server
        (collations). The caller decides exact membership. Buckets outside the range's are
        not read.
        """
        dt = self._open(table)
        return self._range_rows(dt, _layout_of(dt, table), rng, below)

    @staticmethod
    def _range_rows(
        dt: DeltaTable, layout: TableLayout, rng: ChunkRange, below: int | None
    ) -> pa.Table:
        first = layout.key[0]
        first_type = layout.schema.field(first).type
        condition = (
            pc.field(POSITION_COLUMN) < pa.scalar(below, POSITION_TYPE)
            if below is not None
            else pc.scalar(True)
        )
        pruning: list[tuple[str, str, Any]] = []
        if _is_integer_like(first_type):
            if rng.lo is not None and _is_int(rng.lo[0]):
                lo = rng.lo[0]
                if (bound := _bound(lo, first_type)) is not None:
                    condition = condition & (pc.field(first) >= bound)
                if layout.bucket_width is not None:
                    pruning.append((BUCKET_COLUMN, ">=", bucket_of(lo, layout.bucket_width)))
            if rng.hi is not None and _is_int(rng.hi[0]):
                hi = rng.hi[0]
                if (bound := _bound(hi, first_type)) is not None:
                    condition = condition & (pc.field(first) <= bound)
                if layout.bucket_width is not None:
                    pruning.append((BUCKET_COLUMN, "<=", bucket_of(hi, layout.bucket_width)))
        dataset = dt.to_pyarrow_dataset(file_pruning_predicate=pruning or None)
        columns = [*layout.key, POSITION_COLUMN, DELETED_COLUMN]
        return dataset.to_table(columns=columns, filter=condition)

    def read_live(self, table: TableId, columns: Sequence[str] | None = None) -> pa.Table:
        """Current rows: delete markers left out, ``_cdc_`` columns dropped."""
        dt = self._open(table)
        layout = _layout_of(dt, table)
        wanted = list(columns) if columns is not None else layout.source_columns
        unknown = [c for c in wanted if c not in layout.source_columns]
        if unknown:
            raise SinkError(f"{table} has no source columns {unknown}")
        dataset: pads.Dataset = dt.to_pyarrow_dataset()
        return dataset.to_table(columns=wanted, filter=~pc.field(DELETED_COLUMN))

    def read_all(self, table: TableId) -> pa.Table:
        """Every row with the ``_cdc_`` columns, delete markers included."""
        dataset: pads.Dataset = self._open(table).to_pyarrow_dataset()
        return dataset.to_table()


# -- helpers --------------------------------------------------------------------------------


def _bucket_transactions(buckets: Sequence[int], read_version: int) -> list[Transaction]:
    """The application ids that make commits into the same buckets conflict (see the module
    docstring); the version only has to grow."""
    return [Transaction(f"airflow-cdc.bucket.{b}", read_version + 1) for b in buckets]


def _delta_arrow_schema(table: TableId, arrow_schema: pa.Schema) -> pa.Schema:
    """The table schema as Delta stores it (every column nullable: delete markers carry
    only the key), round-tripped through Delta's types so it compares with a stored one."""
    fields = [pa.field(f.name, f.type, nullable=True) for f in arrow_schema]
    fields += [
        pa.field(POSITION_COLUMN, POSITION_TYPE, nullable=True),
        pa.field(DELETED_COLUMN, pa.bool_(), nullable=True),
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


def _stats_columns(schema: pa.Schema) -> str:
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


def _layout_of(dt: DeltaTable, table: TableId) -> TableLayout:
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
    )


def _check_same_layout(
    table: TableId, existing: DeltaTable, wanted: pa.Schema, config: dict[str, str]
) -> None:
    have = pa.schema(existing.schema().to_arrow())
    problems: list[str] = []
    have_types = {f.name: f.type for f in have}
    want_types = {f.name: f.type for f in wanted}
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
    if not problems and have.names != wanted.names:
        problems.append(f"column order {have.names} -> {wanted.names}")
    stored = existing.metadata().configuration
    if stored.get(CONFIG_KEY) != config[CONFIG_KEY]:
        problems.append(f"key {stored.get(CONFIG_KEY)} -> {config[CONFIG_KEY]}")
    if stored.get(CONFIG_BUCKET_WIDTH) != config.get(CONFIG_BUCKET_WIDTH):
        # Writers may derive a width from data that has moved since; the first one sticks
        # and every writer reads it from the table, so this is no error.
        log.info(
            "%s keeps its bucket width %s (asked for %s)",
            table,
            stored.get(CONFIG_BUCKET_WIDTH),
            config.get(CONFIG_BUCKET_WIDTH),
        )
    if problems:
        raise SinkError(
            f"the sink table of {table} at {existing.table_uri} differs from the source: "
            + "; ".join(problems)
            + ". Schema evolution is not supported yet: re-snapshot the table into a new "
            "sink root (or move the old table away)"
        )


def _prepare_changes(
    table: TableId, layout: TableLayout, changes: pa.Table, *, check_keys: bool = True
) -> pa.Table:
    """Check the batch and give it the table's column order and types plus the bucket."""
    target = layout.change_schema
    names = set(changes.column_names)
    missing = [n for n in target.names if n not in names]
    extra = [n for n in changes.column_names if n not in target.names]
    if missing or extra:
        raise SinkError(
            f"changes for {table} do not match the sink table: missing {missing}, "
            f"unexpected {extra} (the sink computes {BUCKET_COLUMN} itself)"
        )
    if len(names) != changes.num_columns:
        raise SinkError(f"changes for {table} repeat a column name: {changes.column_names}")
    try:
        source = changes.select(target.names).cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise SinkError(f"changes for {table} do not fit the sink column types: {exc}") from exc
    for name in (*layout.key, POSITION_COLUMN, DELETED_COLUMN):
        if source.column(name).null_count:
            raise SinkError(f"changes for {table} hold nulls in {name!r}, which must be set")
    if check_keys and source.num_rows:
        _reject_duplicate_keys(table, layout.key, source)
    buckets = bucket_values(source.column(layout.key[0]), layout.bucket_width)
    return source.append_column(pa.field(BUCKET_COLUMN, pa.int64()), buckets)


def _reject_duplicate_keys(table: TableId, key: tuple[str, ...], source: pa.Table) -> None:
    keys = source.select(list(key))
    if keys.group_by(list(key)).aggregate([]).num_rows == source.num_rows:
        return
    counts = keys.group_by(list(key)).aggregate([([], "count_all")])
    dup = counts.filter(pc.greater(counts.column("count_all"), 1)).slice(0, 1).to_pylist()[0]
    raise SinkError(
        f"changes for {table} hold several rows for the key "
        f"{tuple(dup[k] for k in key)!r} ({dup['count_all']} rows): reduce each batch to the "
        "newest row per key (greatest _cdc_position) before applying it"
    )


def _merge_predicate(layout: TableLayout, buckets: Sequence[int]) -> str:
    """Join on key and bucket, with the batch's buckets as literals so that delta-rs prunes
    files and its conflict checker sees which buckets were read. (delta-rs adds the key
    bounds of the source itself when ``streamed_exec`` is off.)"""
    bucket_t = quote_column(BUCKET_COLUMN, "t")
    parts: list[str] = []
    if buckets:
        if len(buckets) <= _MAX_BUCKET_LIST:
            values = ", ".join(str(int(b)) for b in sorted(buckets))
            parts.append(f"{bucket_t} IN ({values})")
        else:
            parts.append(f"{bucket_t} BETWEEN {int(min(buckets))} AND {int(max(buckets))}")
    parts += [f"{quote_column(k, 't')} = {quote_column(k, 's')}" for k in layout.key]
    parts.append(f"{bucket_t} = {quote_column(BUCKET_COLUMN, 's')}")
    return " AND ".join(parts)


def _is_integer_like(kind: pa.DataType) -> bool:
    return bool(pa.types.is_integer(kind) or (pa.types.is_decimal(kind) and kind.scale == 0))


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _bound(value: int, kind: pa.DataType) -> pa.Scalar | None:
    """``value`` as a scalar of the column's type, or None when the type cannot hold it
    (then the filter is left out: the result only has to be a superset)."""
    try:
        return pa.scalar(value, kind)
    except (pa.ArrowInvalid, OverflowError):
        return None
