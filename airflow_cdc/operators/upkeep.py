"""Table upkeep as an Airflow task: a purge of delete markers that can no longer matter,
compaction, checkpoint and vacuum of the Delta tables a stream writes
(``airflow_cdc.sinks.delta.upkeep``), while the stream and backfills go on writing them.
Which markers can go, the metadata DB decides (:mod:`airflow_cdc.metadata.marker_floor`).

The tables are those the stream follows (joined, not dropped) in the metadata DB, narrowed by
``tables`` (names and patterns, as the DAGs' ``tables``) when given: the tables that decay
are the ones the stream writes batch after batch.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_cdc.errors import CdcError, ConfigurationError, SinkError
from airflow_cdc.hooks import CdcMetadataHook
from airflow_cdc.metadata.marker_floor import lowest_floor
from airflow_cdc.model import TableId
from airflow_cdc.model.routes import Routes
from airflow_cdc.operators._base import LakeOperator
from airflow_cdc.operators._params import table_selection
from airflow_cdc.rendered import as_config
from airflow_cdc.sinks.delta import UpkeepResult, UpkeepSettings

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_cdc.metadata.marker_floor import MarkerFloor

__all__ = ["TableUpkeepOperator"]


class TableUpkeepOperator(LakeOperator):
    """Purge old delete markers, compact, checkpoint and vacuum each Delta table stream
    ``stream_id`` follows.

    :param stream_id: the stream whose tables are kept up (templated).
    :param tables: names and patterns narrowing the stream's tables (templated; None: all).
    :param settings: what upkeep does (templated): an :class:`UpkeepSettings` (file size,
        vacuum retention, Z-order, marker retention), or a mapping of some of its fields
        (the DAG's params).

    ``sink_path`` and the connection ids (the lake's and the metadata DB's are read) are
    :class:`~airflow_cdc.operators._base.LakeOperator`'s.

    Returns (XCom) each table's files before and after, no secret. A table whose upkeep
    fails does not stop the others; the task fails at the end, naming them.
    """

    template_fields: Sequence[str] = (
        *LakeOperator.template_fields,
        "stream_id",
        "tables",
        "settings",
    )
    ui_color = "#eef3fd"

    def __init__(
        self,
        *,
        stream_id: str,
        tables: list[str] | str | None = None,
        settings: UpkeepSettings | dict[str, Any] | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.stream_id = stream_id
        self.tables = tables
        self.settings = settings

    def execute(self, context: Context) -> dict[str, dict[str, int]]:
        from airflow_cdc.sinks.delta import DeltaSink

        settings = as_config("settings", UpkeepSettings, self.settings)
        lake = self.lake()
        sink = DeltaSink.of(lake)
        tables, floors = lake_tables(lake.routing, *self._tables(settings))
        self.log.info("Upkeep of %d tables of stream %s: %s", len(tables), self.stream_id, settings)
        report: dict[str, dict[str, int]] = {}
        failed: list[str] = []
        for table in tables:
            floor = floors.get(table)
            if floor is not None:
                self.log.info("%s: delete markers: %s", table, floor.why)
            try:
                result = sink.upkeep(table, settings, None if floor is None else floor.position)
            except CdcError as exc:  # the others are still kept up; the task fails at the end
                self.log.error("%s: upkeep failed: %s", table, exc)
                failed.append(f"{table}: {exc}")
                continue
            self.log.info("%s: %s", table, describe(result))
            report[str(table)] = {
                "files_before": result.before.count,
                "bytes_before": result.before.bytes,
                "files_after": result.after.count,
                "bytes_after": result.after.bytes,
                "vacuumed": result.vacuumed,
                "markers_purged": result.purged,
            }
        if failed:
            raise SinkError(
                f"upkeep failed for {len(failed)} of {len(tables)} tables: {'; '.join(failed)}"
            )
        return report

    def _tables(self, settings: UpkeepSettings) -> tuple[list[TableId], dict[TableId, MarkerFloor]]:
        """The tables to keep up and, when markers are purged, below which position each
        table's markers can go."""
        from airflow_cdc.metadata import MetadataStore

        url = CdcMetadataHook(self.metadata_conn_id).metadata_url()
        with MetadataStore.connect(url, migrate=False) as store:
            followed = [
                t.table
                for t in store.stream_tables.read(self.stream_id)
                if t.joined and not t.dropped
            ]
            chosen = self._chosen(followed)
            if not settings.purge_markers:
                return chosen, {}
            retention = dt.timedelta(hours=settings.marker_retention_hours)
            return chosen, store.streams.marker_floors(self.stream_id, chosen, retention)

    def _chosen(self, followed: list[TableId]) -> list[TableId]:
        if self.tables in (None, "", [], "None"):
            return followed
        selection = table_selection(self.tables)
        chosen = selection.resolve(followed)
        if not chosen:
            raise ConfigurationError(
                f"stream {self.stream_id!r} follows no table that {selection.describe()} "
                f"matches; it follows {', '.join(map(str, followed)) or 'none'}"
            )
        return chosen


def lake_tables(
    routes: Routes, tables: list[TableId], floors: dict[TableId, MarkerFloor]
) -> tuple[list[TableId], dict[TableId, MarkerFloor]]:
    """The Delta tables of ``tables`` (a route's target once for all its sources) and
    each one's marker floor (a target's: the lowest of its sources')."""
    by_lake: dict[TableId, list[TableId]] = {}
    for table in tables:
        by_lake.setdefault(routes.lake_table(table), []).append(table)
    found = {
        lake: lowest_floor([floors[t] for t in sources if t in floors])
        for lake, sources in by_lake.items()
        if floors and all(t in floors for t in sources)
    }
    return list(by_lake), found


def describe(result: UpkeepResult) -> str:
    """``412 files (3.1 MB) -> 2 files (1.2 MB): 0 delete markers purged, 412 compacted into
    2, 0 vacuumed, ...``."""
    before, after = result.before, result.after
    return (
        f"{before.count} files ({before.bytes / 1e6:.1f} MB) -> {after.count} files "
        f"({after.bytes / 1e6:.1f} MB): {result.purged} delete markers purged, "
        f"{result.compacted} compacted into {result.written}, {result.vacuumed} vacuumed, "
        f"version {result.version} ({result.attempts} attempts)"
    )
