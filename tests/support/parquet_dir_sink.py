"""A second sink, for tests only: one Parquet file per table version in a folder.

It exists to show that the :class:`~airflow_cdc.sinks.contract.base.Sink` Protocol is complete: a
format other than Delta implements every method from the Protocol's docstrings and the
product's pure rules (``sinks.contract.last_writer_wins``, ``sinks.contract.columns_change``,
``sinks.contract.table_merge.merge_changes``), never from ``sinks.delta``, and passes the same
contract tests (``tests/unit/test_sink_contract.py``).

Layout: ``<root>/<database>/<table>/v<version>.parquet`` (names escaped by
``sinks.contract.naming``), each file the whole table at that version: the source columns,
``_cdc_position`` and ``_cdc_deleted`` (no ``_cdc_bucket``: one file needs no
partitions), the change metadata columns if the table has them, and in its schema's metadata the table's description (key, columns kept
after a drop, the writers' application versions, the last column change, what a
replacement or a copy was for). A commit writes the next version's file under a temporary
name and links it into place, which fails when another writer took that version first:
the writer reads the table again and retries, so concurrent writers serialise. Files a
:class:`RangeWriter` writes wait in ``_files/`` until committed. A next generation
(:meth:`ParquetDirSink.replace_table`) is a table of its own in ``_next/``.

Small and honest rather than fast: every write reads and rewrites the whole table, and a
promotion does not fence a writer that opened the next generation before it (the Delta
sink does). :meth:`ParquetDirSink.merge_on_executors` groups the tables into ``cores``
tasks of ``runner`` and merges each table with :func:`merge_changes` on a sink opened at
this one's root in the task (a big table is not split by key as Delta's are).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from airflow_cdc.config import StreamBounds
from airflow_cdc.errors import SinkColumnsChangedError, SinkError
from airflow_cdc.model import (
    BinlogPosition,
    ChunkRange,
    RowFilter,
    TableId,
    TableOptions,
    TableSchema,
)
from airflow_cdc.runner import Runner, spread
from airflow_cdc.sinks.contract.base import (
    NO_OPTIONS,
    ApplyResult,
    RangeWriter,
    TableScan,
    TableShape,
    WrittenFile,
)
from airflow_cdc.sinks.contract.cdc_columns import (
    CDC_PREFIX,
    CHANGE_METADATA_FIELDS,
    COMMIT_TS_COLUMN,
    COMMIT_TS_TYPE,
    DELETED_COLUMN,
    OP_COLUMN,
    OP_DELETE,
    POSITION_COLUMN,
    POSITION_TYPE,
    repeated_position,
)
from airflow_cdc.sinks.contract.change_batches import BatchWrite, Merged, TableChanges
from airflow_cdc.sinks.contract.columns_change import ColumnsChange, conform_rows
from airflow_cdc.sinks.contract.conform import (
    check_same_lake_rules,
    check_source_table,
    conform_changes,
)
from airflow_cdc.sinks.contract.last_writer_wins import apply_newer
from airflow_cdc.sinks.contract.naming import escape_segment
from airflow_cdc.sinks.contract.table_merge import merge_changes

__all__ = ["ParquetDirSink", "StagedFile", "TableFiles"]

T = TypeVar("T")

_META = b"airflow_cdc"
_NEXT = "_next"
_FILES = "_files"
#: A change's order among column changes: its statement's position, then its place.
_PER_STATEMENT = 100


@dataclass(frozen=True)
class _Table:
    """One version of a table: its rows and its description."""

    version: int
    rows: pa.Table
    key: tuple[str, ...]
    dropped: tuple[str, ...] = ()
    apps: dict[str, int] = field(default_factory=dict)
    columns_change: int | None = None
    #: The plan a next generation is being built for (writers write ``_next/``).
    next_for: str | None = None
    #: The plan this table was created or promoted for.
    replaced_for: str | None = None
    copied_from: str | None = None
    #: The rules its rows were written under (``model.lake_record``).
    lake_rules: str = ""

    @property
    def change_schema(self) -> pa.Schema:
        return self.rows.schema.remove_metadata()

    @property
    def source_columns(self) -> list[str]:
        return [n for n in self.rows.column_names if not n.startswith(CDC_PREFIX)]

    def describe(self) -> dict[str, Any]:
        return {
            "key": list(self.key),
            "dropped": list(self.dropped),
            "apps": self.apps,
            "columns_change": self.columns_change,
            "next_for": self.next_for,
            "replaced_for": self.replaced_for,
            "copied_from": self.copied_from,
            "lake_rules": self.lake_rules,
        }


class _Conflict(Exception):
    """Another writer committed the version this one meant to."""


@dataclass(frozen=True)
class StagedFile:
    """A file a :class:`TableFiles` wrote, not committed."""

    path: str
    rows: int


@dataclass(frozen=True)
class TableFiles:
    """Writes rows of a key range as Parquet files beside the table (it pickles)."""

    folder: str
    schema: pa.Schema
    key: tuple[str, ...]
    dropped: tuple[str, ...]

    def write(self, rows: pa.Table) -> Sequence[WrittenFile]:
        shaped = conform_changes(TableId("?", "?"), rows, self.schema, self.key, self.dropped)
        folder = Path(self.folder, _FILES)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"part-{uuid.uuid4().hex}.parquet"
        pq.write_table(shaped, path)
        return [StagedFile(str(path), shaped.num_rows)]


class ParquetDirSink:
    """Tables under ``root``, a local folder (see the module docstring)."""

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/") or "/"

    def __repr__(self) -> str:
        return f"ParquetDirSink({self.root!r})"

    # -- places ---------------------------------------------------------------------------

    def table_uri(self, table: TableId) -> str:
        return f"{self.root}/{escape_segment(table.database)}/{escape_segment(table.table)}"

    def _live(self, table: TableId) -> Path:
        return Path(self.table_uri(table))

    def _writable(self, table: TableId) -> Path:
        """Where writers write: the live table, or its next generation while one is built."""
        live = self._live(table)
        return live / _NEXT if _read(live, table).next_for is not None else live

    def exists(self, table: TableId) -> bool:
        return _latest(self._live(table)) is not None

    # -- create -------------------------------------------------------------------------

    def ensure_table(
        self, schema: TableSchema, arrow_schema: pa.Schema, options: TableOptions = NO_OPTIONS
    ) -> None:
        """Create the table, or check an existing one (no buckets here) and give it the
        change metadata columns if asked."""
        change_metadata, lake_rules = options.change_metadata, options.lake_rules
        planned = replace(_planned(schema, arrow_schema, change_metadata), lake_rules=lake_rules)
        if not self.exists(schema.table):
            try:
                _commit(self._live(schema.table), planned)
                return
            except _Conflict:
                pass  # created meanwhile: check that one
        folder = self._writable(schema.table)
        held = _read(folder, schema.table)
        check_same_lake_rules(schema.table, held.lake_rules, lake_rules)
        _check_same(schema.table, held, planned)
        if change_metadata:
            _update(folder, schema.table, _with_change_metadata)

    def replace_table(
        self,
        schema: TableSchema,
        arrow_schema: pa.Schema,
        options: TableOptions,
        *,
        replaced_for: str,
    ) -> bool:
        planned = replace(
            _planned(schema, arrow_schema, options.change_metadata),
            replaced_for=replaced_for,
            lake_rules=options.lake_rules,
        )
        live = self._live(schema.table)
        if not self.exists(schema.table):
            try:
                _commit(live, planned)
                return True
            except _Conflict:
                pass

        def start(held: _Table) -> tuple[bool, _Table | None]:
            if replaced_for in (held.next_for, held.replaced_for):
                return False, None
            shutil.rmtree(live / _NEXT, ignore_errors=True)
            _commit(live / _NEXT, planned)
            return True, replace(held, next_for=replaced_for)

        return _update(live, schema.table, start)

    def promote(self, table: TableId, replaced_for: str) -> bool:
        if not self.exists(table):
            return False
        live = self._live(table)

        def swap(held: _Table) -> tuple[bool, _Table | None]:
            if held.next_for != replaced_for:
                return False, None
            new = _read(live / _NEXT, table)
            apps = {**held.apps, **{k: max(v, held.apps.get(k, v)) for k, v in new.apps.items()}}
            return True, replace(new, version=held.version, apps=apps, next_for=None)

        promoted = _update(live, table, swap)
        if promoted:
            shutil.rmtree(live / _NEXT, ignore_errors=True)
        return promoted

    def copy_table(self, source: TableId, target: TableId, origin: str) -> bool:
        there = self._live(target)
        if self.exists(target):
            return _read(there, target).copied_from == origin
        held = _read(self._live(source), source)
        copy = replace(held, version=-1, next_for=None, copied_from=origin)
        try:
            _commit(there, copy)
        except _Conflict:
            return _read(there, target).copied_from == origin
        return True

    # -- write --------------------------------------------------------------------------

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
        app = _app(app_id, app_version)
        if isinstance(changes, pa.RecordBatchReader):
            changes = changes.read_all()
        attempts = 0

        def merge(held: _Table) -> tuple[ApplyResult, _Table | None]:
            nonlocal attempts
            attempts += 1
            rows = conform_changes(
                table,
                changes,
                held.change_schema,
                held.key,
                held.dropped,
                check_keys=not keys_unique,
            )
            if app is not None and held.apps.get(app[0], -1) >= app[1]:
                return ApplyResult(rows.num_rows, 0, 0, 0, attempts, held.version, True), None
            done = apply_newer(held.rows, rows, held.key, wins_ties=wins_ties)
            changed = done.inserted + done.updated > 0
            result = ApplyResult(
                rows.num_rows,
                done.inserted,
                done.updated,
                done.skipped,
                attempts,
                held.version + 1 if changed or app else held.version,
            )
            if not changed and app is None:
                return result, None
            return result, replace(held, rows=done.rows, apps=_recorded(held.apps, app))

        return _update(self._writable(table), table, merge)

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
        app = _app(app_id, app_version)
        encoded = position.encode()
        stamps = {OP_COLUMN: pa.scalar(OP_DELETE), COMMIT_TS_COLUMN: _stamp(event_time)}

        def mark(held: _Table) -> tuple[int, _Table | None]:
            if app is not None and held.apps.get(app[0], -1) >= app[1]:
                return 0, None
            data = held.rows
            older = pc.and_(
                pc.invert(data.column(DELETED_COLUMN)),
                pc.less(data.column(POSITION_COLUMN), pa.scalar(encoded, POSITION_TYPE)),
            )
            if rows is not None:
                older = pc.and_(older, _selected(data.column(rows.column), rows))
            older = pc.fill_null(older, False)
            marked = int(pc.sum(older).as_py() or 0)
            if not marked and app is None:
                return 0, None
            columns = []
            for name in data.column_names:
                column = data.column(name)
                if name == POSITION_COLUMN:
                    at = repeated_position(encoded, data.num_rows)
                    column = pc.if_else(older, at, column)
                elif name == DELETED_COLUMN:
                    column = pc.or_(column, older)
                elif name in stamps:
                    column = pc.if_else(older, stamps[name], column)
                elif name not in held.key:
                    column = pc.if_else(older, pa.nulls(data.num_rows, column.type), column)
                columns.append(column)
            marked_rows = pa.Table.from_arrays(columns, schema=data.schema)
            return marked, replace(held, rows=marked_rows, apps=_recorded(held.apps, app))

        return _update(self._writable(table), table, mark)

    def evolve(self, table: TableId, change: ColumnsChange, ordinal: int = 0) -> bool:
        if not 0 <= ordinal < _PER_STATEMENT:
            raise ValueError(f"ordinal {ordinal} out of range")
        number = change.position.boundary_number() * _PER_STATEMENT + ordinal

        def alter(held: _Table) -> tuple[bool, _Table | None]:
            if held.columns_change is not None and held.columns_change >= number:
                return False, None
            source = [f for f in held.change_schema if not f.name.startswith(CDC_PREFIX)]
            fields, dropped = change.columns_after(source, held.dropped)
            after = pa.schema(
                [pa.field(f.name, f.type, nullable=True) for f in fields]
                + [f for f in held.change_schema if f.name.startswith(CDC_PREFIX)]
            )
            rows = conform_rows(held.rows, held.change_schema, change, after)
            return True, replace(held, rows=rows, dropped=tuple(dropped), columns_change=number)

        return _update(self._writable(table), table, alter)

    def merge_on_executors(
        self,
        tables: Sequence[TableChanges],
        batch: BatchWrite,
        runner: Runner,
        cores: int,
        bounds: StreamBounds,
    ) -> tuple[list[Merged], int]:
        groups = spread([t.rows + 1 for t in tables], max(1, cores)) if tables else []
        tasks = [(self.root, batch, tuple(tables[i] for i in group)) for group in groups]
        done: list[list[Merged]] = runner(_merge_task, tasks)
        return [merged for task in done for merged in task], len(tasks)

    def range_writer(self, table: TableId) -> TableFiles:
        where = self._writable(table)
        held = _read(where, table)
        return TableFiles(str(where), held.change_schema, held.key, held.dropped)

    def commit_new_range(
        self,
        table: TableId,
        files: Sequence[WrittenFile],
        rng: ChunkRange,
        writer: RangeWriter,
        *,
        source: str | None = None,
    ) -> bool:
        if source is not None:
            raise SinkError("this sink holds no routed tables")
        if not isinstance(writer, TableFiles):
            raise SinkError(f"{writer!r} is not this sink's range writer")
        schema = writer.schema

        def append(held: _Table) -> tuple[bool, _Table | None]:
            if held.change_schema != schema:
                raise SinkColumnsChangedError(
                    f"the columns of {table} changed while {rng.label()} was written"
                )
            if _in_range(held, rng, None).num_rows:
                return False, None
            parts = [pq.read_table(_staged(f).path).cast(schema) for f in files]
            rows = pa.concat_tables([held.rows, *parts])
            return True, replace(held, rows=rows)

        committed = _update(self._writable(table), table, append)
        if committed:
            self.remove_files(table, files)
        return committed

    def remove_files(self, table: TableId, files: Sequence[WrittenFile]) -> None:
        for written in files:
            Path(_staged(written).path).unlink(missing_ok=True)

    # -- read ---------------------------------------------------------------------------

    def shape(self, table: TableId) -> TableShape:
        held = _read(self._writable(table), table)
        columns = tuple(n for n in held.source_columns if n not in held.dropped)
        return TableShape(columns, held.key, held.lake_rules)

    def scan(self, table: TableId) -> TableScan:
        live = self._live(table)
        version = _latest(live)
        if version is None:
            raise _missing(table, live)
        path = str(_file(live, version))
        return TableScan(version, ds.dataset(path, format="parquet"), (path,))

    def applied_version(self, table: TableId, app_id: str) -> int | None:
        return _read(self._writable(table), table).apps.get(app_id)

    def candidates(self, table: TableId, rng: ChunkRange, below: int) -> pa.Table:
        return _in_range(_read(self._writable(table), table), rng, below)

    def counts_of(self, table: TableId, hashes: pa.Array) -> pa.Table:
        raise SinkError(f"{table}: this test sink holds no table without a key")

    def read_live(self, table: TableId, columns: Sequence[str] | None = None) -> pa.Table:
        held = _read(self._live(table), table)
        wanted = list(columns) if columns is not None else held.source_columns
        unknown = [c for c in wanted if c not in held.source_columns]
        if unknown:
            raise SinkError(f"{table} has no source columns {unknown}")
        live = held.rows.filter(pc.invert(held.rows.column(DELETED_COLUMN)))
        return live.select(wanted)

    def read_all(self, table: TableId) -> pa.Table:
        return _read(self._live(table), table).rows


# -- the table's files ------------------------------------------------------------------


def _file(folder: Path, version: int) -> Path:
    return folder / f"v{version:020d}.parquet"


def _latest(folder: Path) -> int | None:
    versions = [int(p.stem[1:]) for p in folder.glob("v*.parquet")]
    return max(versions) if versions else None


def _missing(table: TableId, folder: Path) -> SinkError:
    return SinkError(f"sink table for {table} does not exist at {folder}")


def _read(folder: Path, table: TableId) -> _Table:
    version = _latest(folder)
    if version is None:
        raise _missing(table, folder)
    rows = pq.read_table(_file(folder, version))
    described = json.loads((rows.schema.metadata or {})[_META])
    return _Table(
        version,
        rows.replace_schema_metadata(None),
        tuple(described["key"]),
        tuple(described["dropped"]),
        described["apps"],
        described["columns_change"],
        described["next_for"],
        described["replaced_for"],
        described["copied_from"],
        described["lake_rules"],
    )


def _commit(folder: Path, table: _Table) -> None:
    """``table`` as the version after ``table.version`` (:class:`_Conflict`: taken)."""
    folder.mkdir(parents=True, exist_ok=True)
    described = json.dumps(table.describe()).encode()
    temporary = folder / f".{uuid.uuid4().hex}.tmp"
    pq.write_table(table.rows.replace_schema_metadata({_META: described}), temporary)
    try:
        os.link(temporary, _file(folder, table.version + 1))
    except FileExistsError as exc:
        raise _Conflict from exc
    finally:
        temporary.unlink()


def _update(folder: Path, table: TableId, change: Callable[[_Table], tuple[T, _Table | None]]) -> T:
    """``change`` of the table's latest version committed (None: nothing to commit),
    again on the new latest one while another writer commits first."""
    for _ in range(100):
        result, after = change(_read(folder, table))
        if after is None:
            return result
        try:
            _commit(folder, after)
        except _Conflict:
            continue
        return result
    raise SinkError(f"{table}: too many commit conflicts")


# -- rules ----------------------------------------------------------------------------


def _planned(schema: TableSchema, arrow_schema: pa.Schema, change_metadata: bool) -> _Table:
    check_source_table(schema, arrow_schema)
    if schema.keyless:  # the contract tests keyed tables only (issue 47: Delta holds keyless)
        raise SinkError(f"{schema.table} has no key: this test sink holds keyed tables only")
    fields = [pa.field(f.name, f.type, nullable=True) for f in arrow_schema]
    fields += [pa.field(POSITION_COLUMN, POSITION_TYPE), pa.field(DELETED_COLUMN, pa.bool_())]
    fields += CHANGE_METADATA_FIELDS if change_metadata else []
    return _Table(-1, pa.schema(fields).empty_table(), tuple(schema.key))


def _with_change_metadata(held: _Table) -> tuple[None, _Table | None]:
    """``held`` with the change metadata columns (null in its rows), unless it has them."""
    rows = held.rows
    if OP_COLUMN in rows.column_names:
        return None, None
    for f in CHANGE_METADATA_FIELDS:
        rows = rows.append_column(f, pa.nulls(rows.num_rows, f.type))
    return None, replace(held, rows=rows)


def _stamp(event_time: int) -> pa.Scalar:
    """A time of ``_cdc_commit_ts`` from seconds (0: not known, null)."""
    return pa.scalar(event_time * 1_000_000 if event_time else None, COMMIT_TS_TYPE)


def _check_same(table: TableId, held: _Table, planned: _Table) -> None:
    if held.key != planned.key:
        raise SinkError(f"the sink table of {table} has the key {held.key}, not {planned.key}")
    have = {
        f.name: f.type
        for f in held.change_schema
        if not f.name.startswith(CDC_PREFIX) and f.name not in held.dropped
    }
    want = {f.name: f.type for f in planned.change_schema if not f.name.startswith(CDC_PREFIX)}
    if have != want:
        raise SinkColumnsChangedError(
            f"the sink table of {table} has other columns than the source: {have} != {want}"
        )


def _app(app_id: str | None, app_version: int | None) -> tuple[str, int] | None:
    if (app_id is None) != (app_version is None):
        raise SinkError("give app_id and app_version together (or neither)")
    return None if app_id is None or app_version is None else (app_id, app_version)


def _recorded(apps: dict[str, int], app: tuple[str, int] | None) -> dict[str, int]:
    return apps if app is None else {**apps, app[0]: app[1]}


def _selected(column: pa.ChunkedArray, rows: RowFilter) -> pa.ChunkedArray:
    """Whether each value is one ``rows`` selects."""
    kind = column.type
    found = pa.chunked_array([pa.nulls(len(column), pa.bool_()).fill_null(False)])
    for bounds in rows.ranges:
        part = pc.fill_null(pc.is_valid(column), False)
        if bounds.low is not None:
            part = pc.and_(part, pc.greater_equal(column, _scalar(bounds.low, kind)))
        if bounds.high is not None:
            part = pc.and_(part, pc.less(column, _scalar(bounds.high, kind)))
        found = pc.or_(found, part)
    values = [v for v in rows.values if v is not None]
    if values:
        found = pc.or_(found, pc.is_in(column, pa.array(values, kind)))
    if None in rows.values:
        found = pc.or_(found, pc.is_null(column))
    return pc.fill_null(found, False)


def _scalar(value: int | dt.date | dt.datetime, kind: pa.DataType) -> pa.Scalar:
    return pa.scalar(value, kind)


def _in_range(held: _Table, rng: ChunkRange, below: int | None) -> pa.Table:
    """Key, position and flag of the rows that may lie in ``rng`` (bounds inclusive, only
    an integer first key filtered: a superset) with a position below ``below``."""
    rows = held.rows.select([*held.key, POSITION_COLUMN, DELETED_COLUMN])
    if below is not None:
        rows = rows.filter(pc.less(rows.column(POSITION_COLUMN), pa.scalar(below, POSITION_TYPE)))
    first = rows.column(held.key[0])
    if pa.types.is_integer(first.type):
        if rng.lo is not None and isinstance(rng.lo[0], int):
            rows = rows.filter(pc.greater_equal(first, rng.lo[0]))
            first = rows.column(held.key[0])
        if rng.hi is not None and isinstance(rng.hi[0], int):
            rows = rows.filter(pc.less_equal(first, rng.hi[0]))
    return rows


def _staged(written: WrittenFile) -> StagedFile:
    if not isinstance(written, StagedFile):
        raise SinkError(f"{written!r} was not written by this sink's range writer")
    return written


def _merge_task(task: tuple[str, BatchWrite, tuple[TableChanges, ...]]) -> list[Merged]:
    """One task of :meth:`ParquetDirSink.merge_on_executors`, wherever the runner runs it."""
    root, batch, tables = task
    sink = ParquetDirSink(root)
    return [merge_changes(sink, changes, batch) for changes in tables]
