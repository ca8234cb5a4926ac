"""Verify as an Airflow task: each table's replica checked against its source while the
stream runs (``airflow_cdc.verify``), the result recorded in the metadata DB, and, with
``repair``, a plan that re-snapshots exactly the keys that differ through the chunk path
(its work units are the task's XCom, for the mapped ``snapshot_chunk`` after it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import conf as airflow_conf

from airflow_cdc.config import DEFAULT_CHUNK_ROWS, ChunkingConfig, VerifySettings
from airflow_cdc.errors import ReplicaDiffersError
from airflow_cdc.hooks import CdcMetadataHook, CdcSourceHook
from airflow_cdc.operators._base import SelectedTablesOperator
from airflow_cdc.operators._lineage import LineageMixin
from airflow_cdc.operators._params import selected_tables
from airflow_cdc.rendered import as_bool, as_config

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_cdc.config import SinkConfig, SourceConfig
    from airflow_cdc.metadata import MetadataStore
    from airflow_cdc.model import BinlogPosition, TableSelection
    from airflow_cdc.verify.run import TableOutcome

__all__ = ["VerifyOperator"]


class VerifyOperator(LineageMixin, SelectedTablesOperator):
    """Check ``tables``' replicas against the source; optionally plan their repair.

    ``tables``, ``exclude_tables``, ``sink_path``, ``staging_path`` (where the repair's
    chunk jobs stage files) and the connection ids are
    :class:`~airflow_cdc.operators._base.SelectedTablesOperator`'s.

    :param repair: plan the re-snapshot of the keys that differ (returned as work units);
        else a difference fails the task, naming the keys. Templated.
    :param settings: how the check reads (``config.VerifySettings``: parallelism,
        rows_per_second, range_rows, list_rows, stream_wait_seconds), or a mapping of some
        of its fields. Templated.
    :param stream_id: the stream that follows the tables: each check waits for it to reach
        the source's read views (None: none follows; the lake is compared as it stands).

    Returns (XCom) the repair plan's work units (``PlanSnapshotOperator``'s form; empty
    when nothing is to repair); pushes each table's figures under the key ``summary``.

    Lineage (OpenLineage, when its provider is installed): the checked tables as inputs,
    with the schemas the check read, and their Delta tables (checked, and repaired through
    the chunks of the repair plan) as outputs.
    """

    template_fields: Sequence[str] = (
        *SelectedTablesOperator.template_fields,
        "repair",
        "settings",
        "stream_id",
    )
    ui_color = "#f0f7e9"

    def __init__(
        self,
        *,
        repair: bool | str = False,
        settings: VerifySettings | dict[str, Any] | str | None = None,
        stream_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.repair = repair
        self.settings = settings
        self.stream_id = stream_id

    def execute(self, context: Context) -> list[dict[str, Any]]:
        # Imported when the task runs, not at every DAG parse.
        from airflow_cdc.metadata import MetadataStore

        selection = self.selection()
        repair = as_bool("repair", self.repair)
        settings = as_config("settings", VerifySettings, self.settings)
        sink = self.lake()
        source = CdcSourceHook(self.source_conn_id).source_config()
        store = MetadataStore.connect(CdcMetadataHook(self.metadata_conn_id).metadata_url())
        outcomes = self._verify(store, source, sink, selection, settings, repair)
        label = f"{self.dag_id}/{context['run_id']}"
        handles, plan_id = self._plan_repair(store, label, outcomes)
        for outcome in outcomes:
            store.verifications.record(outcome.verification(label, plan_id))
        context["ti"].xcom_push(key="summary", value=[_figures(o) for o in outcomes])
        self._judge(outcomes, repair)
        return handles

    def _verify(
        self,
        store: MetadataStore,
        source: SourceConfig,
        sink: SinkConfig,
        selection: TableSelection,
        settings: VerifySettings,
        repair: bool,
    ) -> list[TableOutcome]:
        from airflow_cdc.planning.plan_snapshot import chunked_schemas
        from airflow_cdc.source.catalog import load_table_schemas, resolve_selection
        from airflow_cdc.source.connection import connect
        from airflow_cdc.source.server import server_info
        from airflow_cdc.verify.run import verify_tables

        conn = connect(source)
        try:
            info = server_info(conn, store.servers.current(source, may_switch=False))
            tables = selected_tables(resolve_selection(conn, selection), selection)
            # a table without a key with its chunking column (its ranges, and a repair's)
            schemas = chunked_schemas(conn, load_table_schemas(conn, tables))
        finally:
            conn.close()
        self.note_lineage(source, sink, schemas)
        self.log.info("Verifying %d table(s) against %s", len(schemas), info)
        stream_id = str(self.stream_id or "").strip()

        def stream_position() -> BinlogPosition | None:
            state = store.streams.state(stream_id) if stream_id else None
            return state.committed_position if state is not None else None

        return verify_tables(
            source,
            info,
            sink,
            schemas,
            settings,
            stream_position,
            repair=repair,
            on_table=lambda outcome: self.log.info("%s", outcome.summary()),
            lake_columns=self.lake_columns(),
        )

    def _plan_repair(
        self, store: MetadataStore, label: str, outcomes: Sequence[TableOutcome]
    ) -> tuple[list[dict[str, Any]], int | None]:
        """The repair plan's work units and id (none: no range to re-snapshot)."""
        from airflow_cdc.operators._unit_handles import unit_handles

        plans = [plan for outcome in outcomes for plan in outcome.plans()]
        if not plans:
            return [], None
        record = store.plans.create(label=f"{label} repair", plans=plans)
        max_units = airflow_conf.getint("core", "max_map_length", fallback=1024)
        chunking = ChunkingConfig(chunk_rows=DEFAULT_CHUNK_ROWS, max_units=max_units)
        handles = unit_handles(record, chunking, self.lake_columns())
        self.log.info(
            "Repair plan %d: %d range(s) in %d work unit(s) re-snapshot the keys that differ",
            record.plan_id,
            len(plans),
            len(handles),
        )
        return handles, record.plan_id

    def _judge(self, outcomes: Sequence[TableOutcome], repair: bool) -> None:
        failed = [o for o in outcomes if o.check is None]
        differ = [o for o in outcomes if o.check is not None and not o.check.clean]
        if failed or (differ and not repair):
            lines = [o.summary() for o in (*failed, *([] if repair else differ))]
            fix = "" if repair else " Trigger mysql_cdc_verify with repair to re-snapshot them."
            raise ReplicaDiffersError(
                f"{len(differ)} table(s) differ from the source, {len(failed)} not checked: "
                + "; ".join(lines)
                + fix
            )


def _figures(outcome: TableOutcome) -> dict[str, Any]:
    """A table's verification as the task's summary shows it: no key value, no secret."""
    found = outcome.check
    return {
        "table": str(outcome.table),
        "status": outcome.status,
        "rows": found.rows if found else 0,
        "ranges": found.ranges if found else 0,
        "passes": found.passes if found else 0,
        "differences": len(found.differences.keys) if found else 0,
        "repair_ranges": len(outcome.repair),
        "removed_keys": outcome.removed,
        "seconds": round(found.seconds, 1) if found else 0.0,
        "error": outcome.error,
    }
