"""A sink table's columns changed in Delta as the source's changed (``DeltaSink.evolve``).

Three commits, each idempotent:

1. **mark** the table evolving (``airflow_cdc.evolving``): a writer that read the table
   before fails its commit (delta-rs refuses a commit after a concurrent change of the
   table's metadata) and one that reads it after waits (``writable_layout``), so no write
   lands between the read of the files below and their replacement (a plain overwrite would
   not notice one);
2. **change**: where stored rows change (:meth:`ColumnsChange.rewrites`) every data file is
   read, conformed (:func:`conform_rows`) and written anew, and the new files replace the
   old ones in one overwrite that carries the new schema; otherwise the table gains the new
   columns (delta-rs ``add_columns``) or only its properties change. The commit records
   the change as the application transaction ``airflow-cdc.columns`` (its statement's
   position and its place among the statement's tables' changes), so a change the table
   holds is never done twice (a replayed batch, a crash after it);
3. **finish**: the dropped columns kept, the statistics columns, the mark cleared.

delta-rs 1.6 has neither type widening nor renames in place (column mapping), hence the
rewrite. Readers see the old columns up to the change's version and the new ones from it;
time travel keeps the old.

A routed table's change names its source table (``sinks.routes.route_columns``): step 2 makes
the change of the table that the source's makes (its rows alone; :mod:`.route_tables`),
then records the source's columns in the commit that records the change, as the source's
own application transaction (``airflow-cdc.columns@<source>``: each source's positions
are its own). Between the two, a replay finds the table's side done and repeats nothing.

A keyless table's columns are not changed in place (every row's hash would change, and a
dropped column may merge images): refused, the table needs a new snapshot.

The change metadata columns, asked for a table created without them, are added in one
``add_columns`` commit (:func:`add_change_metadata`; the rows held have them null).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, TableFeatures, Transaction
from deltalake.schema import Field as DeltaField
from deltalake.schema import Schema as DeltaSchema

from airflow_cdc.errors import SinkError
from airflow_cdc.model import TableId
from airflow_cdc.sinks.contract.cdc_columns import BUCKET_COLUMN, CHANGE_METADATA_FIELDS
from airflow_cdc.sinks.contract.columns_change import ColumnsChange, conform_rows
from airflow_cdc.sinks.delta.commits import Adding, add_actions, commit_actions
from airflow_cdc.sinks.delta.files import DataFile, write_data_files
from airflow_cdc.sinks.delta.layout import (
    CONFIG_DROPPED,
    CONFIG_EVOLVING,
    STATS_COLUMNS,
    TableLayout,
    delta_fields,
    layout_of,
    stats_columns,
)
from airflow_cdc.sinks.delta.retry import RetryPolicy, retry_conflicts
from airflow_cdc.sinks.delta.route_tables import route_change, route_properties
from airflow_cdc.sinks.storage.storage import Location

__all__ = [
    "COLUMNS_APP",
    "change_version",
    "columns_app",
    "enable_zoneless_timestamps",
    "evolve_table",
]

log = logging.getLogger(__name__)

#: The application transaction whose version is the last column change a table holds.
COLUMNS_APP = "airflow-cdc.columns"
#: Changes of one statement to one table (``change_version``'s ordinal below this).
_PER_STATEMENT = 100
#: Data files read and written at once by a rewrite (pyarrow releases the GIL).
_REWRITE_THREADS = 4


def change_version(change: ColumnsChange, ordinal: int = 0) -> int:
    """The application-transaction version of ``change`` (``ordinal``: its place among its
    statement's changes of the table): the same order as the binlog's."""
    if not 0 <= ordinal < _PER_STATEMENT:
        raise ValueError(f"ordinal {ordinal} out of range")
    return change.position.boundary_number() * _PER_STATEMENT + ordinal


def evolve_table(
    open_table: Callable[[], DeltaTable],
    location: Location,
    table: TableId,
    change: ColumnsChange,
    retry: RetryPolicy,
    ordinal: int = 0,
) -> bool:
    """Carry ``change`` out in the Delta table ``open_table`` opens (see the module
    docstring); False when the table held it already."""
    version, app = change_version(change, ordinal), columns_app(change.source)
    _refuse_keyless(open_table(), table, change)
    if _holds(open_table(), app, version):
        _finish(open_table, table, retry)  # a crash may have left the mark
        return False
    what = f"{table}: columns changed at {change.position}"
    if change.source is not None:
        what += f" in {change.source}"
    retry_conflicts(lambda: _mark(open_table(), table, change), f"{what} (marking)", retry)
    retry_conflicts(lambda: _change(open_table, location, table, change, app, version), what, retry)
    _finish(open_table, table, retry)
    log.info("%s", what)
    return True


def columns_app(source: str | None) -> str:
    """The application transaction of a table's column changes (a routed table's: one a
    source table, as their positions are each one's own)."""
    return COLUMNS_APP if source is None else f"{COLUMNS_APP}@{source}"


def _refuse_keyless(dt: DeltaTable, table: TableId, change: ColumnsChange) -> None:
    """A keyless table's hashes are of its whole rows: a change of columns rehashes every
    row (and a drop may merge images), which is not built in place."""
    if layout_of(dt, table).keyless:
        raise SinkError(
            f"the columns of {table} changed at {change.position}, and {table} has no key: "
            "a change of columns of a table without a key needs a new snapshot of it "
            "(mysql_cdc_backfill with replace)"
        )


def _holds(dt: DeltaTable, app: str, version: int) -> bool:
    held = dt.transaction_version(app)
    return held is not None and int(held) >= version


def _mark(dt: DeltaTable, table: TableId, change: ColumnsChange) -> None:
    """Step 1; the mark also holds the columns kept as dropped after the change, for step
    3 (which a crash may leave to a replay, when the table no longer tells them)."""
    layout = layout_of(dt, table)
    if change.source is None:
        _, dropped = change.columns_after(layout.source_fields, layout.dropped_columns)
    else:  # a routed table keeps none (``route_columns``)
        dropped = list(layout.dropped_columns)
    mark = {"position": change.position.to_text(), "since": time.time(), "dropped": dropped}
    dt.alter.set_table_properties({CONFIG_EVOLVING: json.dumps(mark)}, raise_if_not_exists=False)


def _change(
    open_table: Callable[[], DeltaTable],
    location: Location,
    table: TableId,
    change: ColumnsChange,
    app: str,
    version: int,
) -> None:
    """Step 2 (nothing when the table holds the change); a routed table's: the change its
    source's makes of it (``route_tables.route_change``), then the source's columns
    recorded in the commit that records the change."""
    dt = open_table()
    if _holds(dt, app, version):
        return
    commit = CommitProperties(app_transactions=[Transaction(app, version)])
    if change.source is None:
        _carry_out(dt, location, layout_of(dt, table), table, change, commit)
        return
    routed = route_change(dt, table, change)
    if routed.change is not None:
        _carry_out(dt, location, layout_of(dt, table), table, routed.change, None)
        dt = open_table()
    dt.alter.set_table_properties(
        route_properties(routed.after), raise_if_not_exists=False, commit_properties=commit
    )


def _carry_out(
    dt: DeltaTable,
    location: Location,
    layout: TableLayout,
    table: TableId,
    change: ColumnsChange,
    commit: CommitProperties | None,
) -> None:
    """``change`` of the table's columns and, where they change, its stored rows."""
    fields, dropped = change.columns_after(layout.source_fields, layout.dropped_columns)
    fields = delta_fields(table, fields)
    enable_zoneless_timestamps(dt, fields)
    held = layout.source_columns if change.source is not None else layout.dropped_columns
    if change.rewrites(held):
        _rewrite(dt, location, layout, change, fields, commit)
    elif change.added:
        new = [f for f in fields if f.name not in layout.source_columns]
        dt.alter.add_columns(
            [DeltaField.from_arrow(pa.field(f.name, f.type)) for f in new],
            commit_properties=commit,
        )
    else:  # a dropped column kept: only the properties change
        dt.alter.set_table_properties(
            {CONFIG_DROPPED: json.dumps(dropped)},
            raise_if_not_exists=False,
            commit_properties=commit,
        )


def add_change_metadata(
    opened: Callable[[], DeltaTable], table: TableId, policy: RetryPolicy
) -> bool:
    """Give ``table`` the change metadata columns unless it has them (False) or is keyless
    (False: a keyless table never has them)."""

    def attempt() -> bool:
        dt = opened()
        layout = layout_of(dt, table)
        if layout.change_metadata or layout.keyless:
            return False
        dt.alter.add_columns([DeltaField.from_arrow(f) for f in CHANGE_METADATA_FIELDS])
        log.info("%s: added the change metadata columns", table)
        return True

    added, _ = retry_conflicts(attempt, f"add the change metadata columns to {table}", policy)
    return added


def enable_zoneless_timestamps(dt: DeltaTable, fields: list[pa.Field]) -> None:
    """A table gaining its first zone-less timestamp (a ``DATETIME`` column) needs Delta's
    ``timestampNtz`` feature first (delta-rs 1.6 refuses the schema without it; a table
    created with such a column has it)."""
    zoneless = any(pa.types.is_timestamp(f.type) and f.type.tz is None for f in fields)
    if zoneless and "timestampNtz" not in (dt.protocol().writer_features or []):
        dt.alter.add_feature(
            TableFeatures.TimestampWithoutTimezone, allow_protocol_versions_increase=True
        )
        dt.update_incremental()


def _rewrite(
    dt: DeltaTable,
    location: Location,
    layout: TableLayout,
    change: ColumnsChange,
    fields: list[pa.Field],
    commit: CommitProperties | None,
) -> None:
    """Every data file read, conformed and written anew; one overwrite commit with the new
    schema replaces them (the new files are deleted again when it provably did not land,
    :func:`~.commits.commit_actions`)."""
    before = layout.change_schema
    cdc = [f for f in before if f.name not in layout.source_columns]
    after = pa.schema(fields + cdc)
    paths = [unquote(str(p)) for p in pa.table(dt.get_add_actions(flatten=True)).column("path")]
    filesystem, root = location.resolve()

    def rewrite_file(path: str) -> list[DataFile]:
        rows = pq.read_table(f"{root}/{path}", filesystem=filesystem)
        conformed = conform_rows(rows, before, change, after)
        return write_data_files(location, conformed, after, layout.key, layout.bucket_width)

    with ThreadPoolExecutor(_REWRITE_THREADS, thread_name_prefix="evolve") as pool:
        files = [f for written in pool.map(rewrite_file, paths) for f in written]
    bucket = pa.field(BUCKET_COLUMN, pa.int64())
    commit_actions(
        dt,
        add_actions(files, int(time.time() * 1000)),
        commit,
        Adding(location, tuple(files), discard=True),
        overwrite=DeltaSchema.from_arrow(after.append(bucket)),
    )
    log.info("rewrote %d data files of %s into %d", len(paths), dt.table_uri, len(files))


def _finish(open_table: Callable[[], DeltaTable], table: TableId, retry: RetryPolicy) -> None:
    """Step 3: the table's properties as its columns now are, the mark cleared."""

    def finish() -> None:
        dt = open_table()
        layout = layout_of(dt, table)
        if layout.evolving is None:
            return
        properties = {
            STATS_COLUMNS: stats_columns(layout.schema),
            CONFIG_DROPPED: json.dumps(json.loads(layout.evolving)["dropped"]),
            CONFIG_EVOLVING: "",
        }
        dt.alter.set_table_properties(properties, raise_if_not_exists=False)

    retry_conflicts(finish, f"{table}: finishing a change of columns", retry)
