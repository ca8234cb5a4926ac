"""Plan the snapshot: split each table into key-range chunks and record them.

The plan lives in the metadata DB (the source of truth for chunk status and watermarks);
XCom carries only small handles to it, one per chunk, so that the mapped snapshot task
gets one map index per chunk and no key values or secrets go through Airflow.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk import conf as airflow_conf

from airflow_cdc.config import ChunkingConfig, LakeColumnsConfig, SinkConfig, SourceConfig
from airflow_cdc.config.startup import StartupConfig
from airflow_cdc.errors import ConfigurationError
from airflow_cdc.hooks import CdcMetadataHook, CdcSourceHook
from airflow_cdc.model import LeftOut, TableId, TablePlan, TableSelection
from airflow_cdc.operators._base import SelectedTablesOperator
from airflow_cdc.operators._lineage import LineageMixin
from airflow_cdc.operators._params import (
    PlanRequest,
    check_known_params,
    check_routes,
    key_range_data,
    plan_request,
    selected_tables,
    table_selection,
)
from airflow_cdc.operators._unit_handles import start_handle, unit_handles
from airflow_cdc.rendered import (
    as_config,
)
from airflow_cdc.settings import setting

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_cdc.metadata import MetadataStore
    from airflow_cdc.metadata.records import PlanRecord
    from airflow_cdc.planning.plan_snapshot import SnapshotPlan

__all__ = ["PLAN_ID_XCOM_KEY", "PlanSnapshotOperator"]

#: XCom key under which the plan operator also pushes the plan id.
PLAN_ID_XCOM_KEY = "plan_id"


class PlanSnapshotOperator(LineageMixin, SelectedTablesOperator):
    """Validate the source, plan the chunks of ``tables`` and store the plan.

    ``tables``, ``exclude_tables``, ``sink_path``, ``staging_path`` and the connection ids
    are :class:`~airflow_cdc.operators._base.SelectedTablesOperator`'s. ``tables`` are
    resolved against the server's catalog when the task runs (the list is logged);
    ``sink_path`` and ``staging_path`` are checked here (a probe object is written and
    deleted with the lake connection's credentials), so a wrong path, bucket or key fails
    before any Spark job starts.

    :param chunking: how tables are split into chunks, as the stream's ``discovery`` takes
        it: a :class:`~airflow_cdc.config.ChunkingConfig`, or a mapping of some of its fields
        (each value may be a template: ``{"chunk_rows": "{{ params.chunk_rows }}"}``); the
        others keep their defaults. Its ``max_units`` is Airflow's ``[core]
        max_map_length`` (one mapped task per work unit). Templated, checked after rendering
        (without a template, when the DAG is parsed).
    :param chunk_keys: ``{"db.table": ["col", ...]}``: chunk key for tables without a primary
        key (must be unique and not null). Templated; a rendered JSON/dict string is accepted.
    :param key_range: ``{"lo": [...], "hi": [...]}``: plan only the keys ``lo <= key < hi`` of
        the one table given (a backfill; either side null/missing for unbounded), one JSON
        scalar per key column, checked against the columns' types. Templated.
    :param allowed_tables: the configured set of tables (names and patterns); a table outside it is
        refused before the source is contacted. Templated; ``None`` allows any table.
    :param join_stream: a stream id: ask that stream to follow the planned tables. A table
        new to it joins the running stream once this snapshot is done (no restart; see
        ``airflow_cdc.stream.joining``); a table it already follows is left as it is.
        Templated; ``None``: ask no stream (the stream's own table list covers it).
    :param startup: where the replication starts (``config.StartupConfig``, or a mapping of
        its fields, each may be a template): ``initial`` (the default) and
        ``snapshot_only`` plan the snapshot; ``latest``, ``position`` (``start_position``)
        and ``timestamp`` (``start_timestamp``) snapshot nothing: they record one done chunk
        per table holding no rows at that binlog position (``snapshot.start_plan``), so the
        stream starts there, and return no work unit. Not with ``key_range`` or ``replace``.
    :param replace: snapshot the tables whole into new generations of their Delta tables
        (with the table's columns and key now, built beside the live one, which readers
        keep reading until the new one takes its place in one commit;
        ``snapshot.replacement``): the way on after a change the stream cannot carry over
        in place. ``join_stream`` stops reading them until this snapshot is done, then
        joins them anew. No ``key_range``.
        Templated (a rendered ``"True"``/``"False"`` is accepted).

    Returns (XCom) one dict per work unit (``planning.packing``: a large table's chunks
    apart, small tables together, about ``chunking.chunk_rows`` rows each): ``plan_id``,
    ``chunk_ids``, ``tables`` (how many), ``estimated_rows`` and ``label``; the plan id is
    also pushed under the key ``plan_id``.

    Lineage (OpenLineage, when its provider is installed): the planned tables as inputs,
    with the schemas the plan read, and their Delta tables as outputs (``operators._lineage``).
    """

    template_fields: Sequence[str] = (
        *SelectedTablesOperator.template_fields,
        "chunking",
        "chunk_keys",
        "key_range",
        "allowed_tables",
        "join_stream",
        "replace",
        "startup",
    )
    template_fields_renderers: ClassVar[dict[str, str]] = {
        **SelectedTablesOperator.template_fields_renderers,
        "chunking": "json",
        "chunk_keys": "json",
        "key_range": "json",
        "allowed_tables": "json",
        "startup": "json",
    }
    ui_color = "#e8f4fd"

    def __init__(
        self,
        *,
        chunking: ChunkingConfig | Mapping[str, Any] | str | None = None,
        chunk_keys: dict[str, list[str]] | str | None = None,
        key_range: dict[str, Any] | str | None = None,
        allowed_tables: list[str] | str | None = None,
        join_stream: str | None = None,
        replace: bool | str = False,
        startup: StartupConfig | Mapping[str, Any] | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.chunking = chunking
        self.chunk_keys = chunk_keys
        self.key_range = key_range
        self.allowed_tables = allowed_tables
        self.join_stream = join_stream
        self.replace = replace
        self.startup = startup
        # No template: checked when the DAG is parsed.
        if "{{" not in str(chunking):
            as_config("chunking", ChunkingConfig, chunking)
        if "{{" not in str(startup):
            self.startup_config()

    # -- validation of rendered values -------------------------------------------------
    def check_allowed(self, tables: Sequence[TableId]) -> None:
        """Refuse a table outside ``allowed_tables`` (the configured tables and patterns),
        naming them."""
        if self.allowed_tables is None or self.allowed_tables == "":
            return
        allowed = table_selection(self.allowed_tables, None, name="allowed_tables")
        for table in tables:
            if not allowed.matches(table):
                raise ConfigurationError(
                    f"table {str(table)!r} is not in the configured set of tables "
                    f"({allowed.describe()}); pick one of them, or add it to the set "
                    f"({setting('tables').label} of Airflow's configuration)"
                )

    def followed(self, selection: TableSelection) -> TableSelection | None:
        """Beside the planned tables, the tables ``columns`` and ``masks`` are judged
        against (``planning.lake_rules``): with ``allowed_tables`` (a backfill of one
        table of the configured set), that set, less ``selection``'s excluded ones."""
        if self.allowed_tables is None or self.allowed_tables == "":
            return None
        allowed = table_selection(self.allowed_tables, None, name="allowed_tables")
        return TableSelection(allowed.include, selection.exclude)

    def chunking_config(self) -> ChunkingConfig:
        """The rendered ``chunking``, at most as many work units as Airflow maps."""
        given = as_config("chunking", ChunkingConfig, self.chunking)
        if given.max_units != ChunkingConfig.max_units:
            raise ConfigurationError(
                "chunking.max_units is Airflow's [core] max_map_length (one mapped task per "
                "work unit): set that instead"
            )
        max_units = airflow_conf.getint("core", "max_map_length", fallback=given.max_units)
        return dataclasses.replace(given, max_units=max_units)

    def startup_config(self) -> StartupConfig:
        """The rendered ``startup`` (an empty form field renders as ``""`` or ``"None"``)."""
        given = self.startup
        if isinstance(given, Mapping):
            given = {k: "" if v in (None, "None") else v for k, v in given.items()}
        return as_config("startup", StartupConfig, given)

    # -- execution -----------------------------------------------------------------------
    def execute(self, context: Context) -> list[dict[str, Any]]:
        check_known_params(context)
        asked = self._asked()
        sink = self.lake(check=True)
        lake_columns = self.lake_columns()
        source = CdcSourceHook(self.source_conn_id).source_config()
        metadata_url = CdcMetadataHook(self.metadata_conn_id).metadata_url()
        planned = self._plan(source, metadata_url, asked, context, sink, lake_columns)
        record, plans = planned.record, planned.plans
        check_routes(sink, planned.schemas or ())
        self.note_lineage(source, sink, planned.schemas or record.tables, metadata_url=metadata_url)
        if not asked.startup.snapshots:
            context["ti"].xcom_push(key=PLAN_ID_XCOM_KEY, value=record.plan_id)
            return [start_handle(record, asked.startup.mode)]
        if asked.replace:
            self._replace(source, metadata_url, sink, lake_columns, record, context)

        self._log_plans(plans, asked.chunking.chunk_rows)
        handles = unit_handles(record, asked.chunking, lake_columns)
        self.log.info(
            "Plan %d stored: %d chunk(s) of %d table(s) in %d work unit(s), one mapped task each",
            record.plan_id,
            len(record.chunks),
            len(plans),
            len(handles),
        )
        context["ti"].xcom_push(key=PLAN_ID_XCOM_KEY, value=record.plan_id)
        return handles

    def _asked(self) -> PlanRequest:
        """What the task is asked, rendered and checked before the source is contacted."""
        selection = self.selection()
        self.check_allowed(selection.exact_tables())
        return plan_request(
            selection,
            chunking=self.chunking_config(),
            startup=self.startup_config(),
            key_range=self.key_range,
            chunk_keys=self.chunk_keys,
            replace=self.replace,
        )

    def _plan(
        self,
        source: SourceConfig,
        metadata_url: str,
        asked: PlanRequest,
        context: Context,
        sink: SinkConfig,
        lake_columns: LakeColumnsConfig,
    ) -> SnapshotPlan:
        """The selected tables planned on the server (``planning.plan_snapshot``: checked,
        split, recorded; of the ``key_range`` only when given), or, for a ``startup``
        without a snapshot, their start recorded (:meth:`_start`); and ``join_stream`` (if
        any) asked to follow them."""
        # Heavy imports (pymysql, SQLAlchemy) stay in the methods: the DAG processor imports
        # this module at every parse, and only a running task needs them.
        from airflow_cdc.metadata import MetadataStore
        from airflow_cdc.metadata.left_out import plan_scope
        from airflow_cdc.planning.plan_snapshot import plan_snapshot
        from airflow_cdc.source.connection import connect
        from airflow_cdc.source.server import server_info

        keys, startup = asked.keys, asked.startup
        conn = connect(source)
        try:
            tables, left_out = self._resolve(conn, asked.selection)
            self.log.info("Source server %s; planning %d table(s)", server_info(conn), len(tables))
            key_range = key_range_data(self.key_range) if asked.ranged else None
            with MetadataStore.connect(metadata_url) as store:
                if startup.snapshots:
                    planned = plan_snapshot(
                        conn,
                        store,
                        tables,
                        asked.chunking,
                        str(context["run_id"]),
                        chunk_keys=keys,
                        key_range=key_range,
                        lake_columns=lake_columns,
                        followed=self.followed(asked.selection),
                    )
                else:
                    planned = self._start(
                        conn, source, store, sink, lake_columns, tables, startup, keys, context
                    )
                store.left_out.note(plan_scope(planned.record.plan_id), left_out)
                self._join(store, tables, context)
            return planned
        finally:
            conn.close()

    def _start(
        self,
        conn: Any,
        source: SourceConfig,
        store: MetadataStore,
        sink: SinkConfig,
        lake_columns: LakeColumnsConfig,
        tables: list[TableId],
        startup: StartupConfig,
        keys: dict[TableId, tuple[str, ...]],
        context: Context,
    ) -> SnapshotPlan:
        """The tables' start without a snapshot, recorded (``snapshot.start_plan``)."""
        # Imported when the task runs, not at every DAG parse.
        from airflow_cdc.sinks.contract.formats import open_sink
        from airflow_cdc.snapshot.start_plan import record_start_plan

        planned, position = record_start_plan(
            conn,
            source,
            store,
            open_sink(sink),
            tables,
            startup,
            str(context["run_id"]),
            chunk_keys=keys,
            lake_columns=lake_columns,
            followed=self.followed(self.selection()),
        )
        self.log.info(
            "No snapshot (startup_mode %s): plan %d starts %d table(s) at binlog position %s; "
            "their Delta tables hold the changes from there on, no row from before",
            startup.mode,
            planned.record.plan_id,
            len(tables),
            position,
        )
        return planned

    def _join(self, store: MetadataStore, tables: list[TableId], context: Context) -> None:
        """Ask ``join_stream`` (if any) to follow ``tables``."""
        join_stream = str(self.join_stream or "").strip()
        if not join_stream:
            return
        requested_by = f"{self.dag_id}/{context['run_id']}"
        for table in store.stream_tables.request(join_stream, tables, requested_by=requested_by):
            self.log.info(
                "%s is new to stream %s: it joins the running stream once this snapshot is "
                "done (no restart needed)",
                table,
                join_stream,
            )

    def _replace(
        self,
        source: SourceConfig,
        metadata_url: str,
        sink: SinkConfig,
        lake_columns: LakeColumnsConfig,
        record: PlanRecord,
        context: Context,
    ) -> None:
        """Start new generations of the planned tables' Delta tables (``replace``)."""
        # Imported when the task runs, not at every DAG parse.
        from airflow_cdc.snapshot.replacement import replace_tables

        stream_id = str(self.join_stream or "").strip() or None
        reason = f"{self.dag_id}/{context['run_id']}: replaced"
        for table in replace_tables(
            source,
            metadata_url,
            sink,
            record.plan_id,
            stream_id=stream_id,
            reason=reason,
            lake_columns=lake_columns,
        ):
            self.log.info(
                "%s: this plan snapshots it into a new generation of its Delta table, which "
                "takes the live table's place when done%s",
                table,
                f"; stream {stream_id} joins it anew when it is done" if stream_id else "",
            )

    def _log_plans(self, plans: Sequence[TablePlan], chunk_rows: int) -> None:
        for plan in plans:
            self.log.info(
                "%s %s: key (%s), %d chunk(s) of ~%d rows, ~%d rows, split %s",
                plan.table,
                "(all keys)" if plan.is_full else f"range {plan.covers.label()}",
                ", ".join(plan.key),
                len(plan.ranges),
                chunk_rows,
                plan.estimated_rows,
                plan.method,
            )

    def _resolve(self, conn: Any, selection: TableSelection) -> tuple[list[TableId], list[LeftOut]]:
        """The tables the selection picks on the server, checked against the allowed set,
        and those its patterns match that are left out, each logged with the reason."""
        # Imported when the task runs, not at every DAG parse.
        from airflow_cdc.source import catalog

        resolution = catalog.resolve_tables(conn, selection)
        for entry in resolution.left_out:
            self.log.warning(
                "%s matches %s, left out: %s", entry.table, selection.describe(), entry.reason
            )
        tables = selected_tables(resolution.tables, selection, resolution.left_out)
        if not selection.is_exact:
            shown = ", ".join(map(str, tables[:50]))
            more = f" and {len(tables) - 50} more" if len(tables) > 50 else ""
            self.log.info(
                "%s selects %d table(s): %s%s", selection.describe(), len(tables), shown, more
            )
        self.check_allowed(tables)
        return tables, resolution.left_out
