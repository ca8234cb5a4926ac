"""What the Delta sink answers about its tables (:class:`DeltaTables`, a base of
:class:`~airflow_cdc.sinks.delta.sink.DeltaSink`): where each lives, its layout and shape,
what a writer recorded, and its rows for readers; the writes are the facade's own.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from deltalake import DeltaTable

from airflow_cdc.model import ChunkRange, TableId
from airflow_cdc.sinks.contract.base import TableScan, TableShape
from airflow_cdc.sinks.delta.layout import TableLayout, layout_of, plain_protocol
from airflow_cdc.sinks.delta.places import TablePlaces
from airflow_cdc.sinks.delta.ranges import range_rows
from airflow_cdc.sinks.delta.reads import all_rows, held_counts, live_rows
from airflow_cdc.sinks.storage.storage import Location

__all__ = ["DeltaTables"]


class DeltaTables:
    """The tables under a sink's root, as :class:`TablePlaces` finds them (``_places``,
    set by the sink)."""

    _places: TablePlaces

    def table_uri(self, table: TableId) -> str:
        """``<root>/<escaped database>/<escaped table>``: the live table (its next
        generation, which writers may be sent to, lies below it)."""
        return self._places.uri(table)

    def table_location(self, table: TableId) -> Location:
        """Where writers of ``table`` write (:mod:`.places`)."""
        return self._places.writable_location(table)

    def exists(self, table: TableId) -> bool:
        return self._places.exists(table)

    def _open(self, table: TableId) -> DeltaTable:
        return self._places.open(table)

    def shape(self, table: TableId) -> TableShape:
        layout = self.layout(table)
        return TableShape(
            tuple(layout.live_columns), layout.key, layout.lake_rules, layout.route_columns
        )

    def scan(self, table: TableId) -> TableScan:
        """The live table's current version (its files by path when plain and local)."""
        dt = self._places.open_live(table)
        files = dt.file_uris()
        local = bool(files) and plain_protocol(dt) and all("://" not in f for f in files)
        return TableScan(dt.version(), dt.to_pyarrow_dataset(), tuple(files) if local else None)

    def layout(self, table: TableId) -> TableLayout:
        dt = self._places.take(table)
        layout = layout_of(dt, table)
        self._places.keep(table, dt)
        return layout

    def applied_version(self, table: TableId, app_id: str) -> int | None:
        """The last version ``app_id`` recorded in ``table`` with :meth:`apply`, if any."""
        version = self._open(table).transaction_version(app_id)
        return None if version is None else int(version)

    def candidates(self, table: TableId, rng: ChunkRange, below: int) -> pa.Table:
        """Key columns, ``_cdc_position`` and ``_cdc_deleted`` of sink rows that may lie in
        ``rng`` and hold a position less than ``below``.

        A superset: only the first key column is filtered (its bounds inclusive), and only
        when it is an integer, because other types may order differently on the server
        (collations). The caller decides exact membership. Buckets outside the range's are
        not read.
        """
        dt = self._open(table)
        return self._range_rows(dt, layout_of(dt, table), rng, below)

    def counts_of(self, table: TableId, hashes: pa.Array) -> pa.Table:
        """The writers' table's counts of those images (``reads.held_counts``)."""
        return held_counts(self._open(table), hashes)

    # An attribute: a test puts another writer between commit_new_range's check and commit.
    _range_rows = staticmethod(range_rows)

    def read_live(self, table: TableId, columns: Sequence[str] | None = None) -> pa.Table:
        """Current rows of the live table: delete markers left out, ``_cdc_`` columns
        dropped; a keyless table's rows repeated by their counts (``sinks.multiset.keyless``)."""
        return live_rows(self._places.open_live(table), table, columns)

    def read_all(self, table: TableId) -> pa.Table:
        """Every row of the live table with the ``_cdc_`` columns, delete markers included."""
        return all_rows(self._places.open_live(table))
