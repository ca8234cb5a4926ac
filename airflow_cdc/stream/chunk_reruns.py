"""The driver's side of chunk re-runs that finish under a batch (``stream.stale_marks``
says why): the batch's rows filtered again with the marks read before merging, and the
ranges of chunks recorded while it merged swept after. Tables keyed by hash are left
alone: the stream filters none of their changes (``stream.emit_filter``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from airflow_cdc.config import LakeColumnsConfig, SinkConfig, SourceConfig
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.watermarks import TableWatermarks
from airflow_cdc.model import TableId, TableSchema
from airflow_cdc.planning.key_order import sort_key_for
from airflow_cdc.sinks.contract.base import Sink
from airflow_cdc.sinks.contract.change_batches import Block, read_block
from airflow_cdc.snapshot.sweep import sweep_range
from airflow_cdc.stream.apply_counts import Marks
from airflow_cdc.stream.emit_filter import EmitFilter
from airflow_cdc.stream.slice_blocks import SliceBlocks
from airflow_cdc.stream.stale_marks import new_marks, refiltered, stale_tables

__all__ = ["ChunkReruns"]

log = logging.getLogger("airflow_cdc.stream")


class ChunkReruns:
    """Reads the marks of a batch's tables before and after its merge, and acts on what
    moved."""

    def __init__(
        self,
        store: MetadataStore,
        sink: Sink,
        sink_config: SinkConfig,
        source: SourceConfig,
        lake_columns: LakeColumnsConfig | None = None,
    ) -> None:
        self._store = store
        self._sink = sink
        self._sink_config = sink_config
        self._source = source
        self._lake_columns = lake_columns or LakeColumnsConfig()

    def _filtered(self, schemas: Mapping[TableId, TableSchema]) -> dict[TableId, TableSchema]:
        """The tables whose changes the emit filter filters: those with a key, not keyed
        by hash."""
        hashed = self._lake_columns.keyed_by_hash(schemas.values())
        return {t: s for t, s in schemas.items() if not s.keyless and t not in hashed}

    def marks(self, schemas: Mapping[TableId, TableSchema]) -> dict[TableId, Marks]:
        """The tables' chunk marks now (one query)."""
        if not schemas:
            return {}
        return self._store.watermarks.of_tables({t: sort_key_for(s) for t, s in schemas.items()})

    def filter_again(
        self,
        blocks: Mapping[TableId, Sequence[Block]],
        used: Mapping[TableId, str],
        fresh: Mapping[TableId, Marks],
        schemas: Mapping[TableId, TableSchema],
        put: SliceBlocks,
    ) -> dict[TableId, list[Block]]:
        """The blocks of the tables whose marks moved since their slices filtered, filtered
        again with ``fresh`` (``put``: where the new blocks go); the others are left out."""
        filtered = self._filtered({t: schemas[t] for t in blocks})
        digests = {t: used.get(t, "") for t in blocks if t in filtered}
        moved = stale_tables(digests, fresh)
        again: dict[TableId, list[Block]] = {}
        for table in moved:
            schema = schemas[table]
            emit = EmitFilter({table: fresh.get(table, ())}, {table: schema})
            kept: list[Block] = []
            for block in blocks[table]:
                rows = read_block(self._sink_config, block)
                left = refiltered(rows, table, schema, emit)
                if left.num_rows == rows.num_rows:
                    kept.append(block)
                elif left.num_rows:
                    kept.append(put.put(left, schema.key[0]))
            log.info(
                "%s: its chunk marks moved since this batch was planned (a chunk re-run): "
                "its rows filtered again, %d of %d kept",
                table,
                sum(b.rows for b in kept),
                sum(b.rows for b in blocks[table]),
            )
            again[table] = kept
        return again

    def sweep_new(
        self,
        before: Mapping[TableId, Marks],
        schemas: Mapping[TableId, TableSchema],
    ) -> int:
        """Sweep the range of each chunk recorded since ``before`` was read
        (``snapshot.sweep``); rows marked deleted."""
        keyed = {t: s for t, s in self._filtered(schemas).items() if t in before}
        after = self.marks(keyed)
        swept = 0
        for table, schema in keyed.items():
            now = after.get(table, TableWatermarks())
            for rng, high in new_marks(before[table], now, now.unread):
                stored = self._lake_columns.for_table(schema).project(schema)
                found = sweep_range(self._sink, self._source, stored, rng, high)
                if found:
                    log.info(
                        "%s %s: %d row(s) older than the chunk's new high watermark %s "
                        "marked deleted (the chunk was re-run while this batch merged)",
                        table,
                        rng.label(),
                        found,
                        high,
                    )
                swept += found
        return swept
