"""What the operators make of their rendered params: the table selection and the lake
(``rendered`` coerces the values themselves), what of the columns reaches it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_cdc.config import (
    ChunkingConfig,
    LakeColumnsConfig,
    SinkConfig,
    SourceConfig,
    parse_lake_rules,
)
from airflow_cdc.config.startup import StartupConfig, StartupMode
from airflow_cdc.errors import ConfigurationError
from airflow_cdc.hooks import CdcLakeHook, CdcMaskHook
from airflow_cdc.metadata.codec import table_to_text
from airflow_cdc.model import LeftOut, TableId, TableSchema, TableSelection
from airflow_cdc.model.lake_columns import LakeColumnRules
from airflow_cdc.rendered import as_bool, as_mapping, as_str_list, parse_literal

__all__ = [
    "PlanRequest",
    "check_known_params",
    "check_routes",
    "check_sink",
    "chunk_key_map",
    "key_range_data",
    "key_range_given",
    "lake_columns",
    "lake_rules",
    "lake_sink",
    "plan_request",
    "resolved_tables",
    "selected_tables",
    "table_selection",
]


def table_selection(include: Any, exclude: Any = None, *, name: str = "tables") -> TableSelection:
    """Rendered ``tables`` (and ``exclude_tables``) as a selection: names and patterns
    (``model.selection``); a wrong entry is named with the accepted forms."""
    entries = as_str_list(name, include)
    if not entries:
        raise ConfigurationError(
            f"{name} is empty: give at least one table as 'database.table' or a pattern "
            "such as 'shop.*'"
        )
    excluded = [] if exclude in (None, "", [], ()) else as_str_list("exclude_tables", exclude)
    try:
        return TableSelection.parse(entries, excluded)
    except ValueError as exc:
        raise ConfigurationError(f"{name}: {exc}") from exc


def selected_tables(
    tables: list[TableId], selection: TableSelection, left_out: Sequence[LeftOut] = ()
) -> list[TableId]:
    """``tables``, what ``selection`` picked on the server; refused when it is nothing
    (naming what its patterns matched and left out, if anything)."""
    if not tables and left_out:
        raise ConfigurationError(
            f"no table {selection.describe()} matches can be followed: "
            f"{'; '.join(entry.line() for entry in left_out[:20])}"
        )
    if not tables:
        raise ConfigurationError(
            f"no table on the source matches {selection.describe()}; check the patterns "
            "(globs such as shop.*, or re:<regular expression>) and the CDC user's grants"
        )
    return tables


def resolved_tables(source: SourceConfig, selection: TableSelection) -> tuple[str, ...]:
    """The tables the selection picks, as the metadata DB writes them; only a selection with
    patterns reads the server's catalog."""
    # Heavy imports (pymysql, pyarrow) stay in the functions: the DAG processor imports
    # this module at every parse, and only a running task needs them.
    from airflow_cdc.source.catalog import resolve_selection
    from airflow_cdc.source.connection import on_server

    if selection.is_exact:
        tables = selection.exact_tables()
    else:
        tables = on_server(
            source, lambda conn: resolve_selection(conn, selection), what="listing tables"
        )
    return tuple(table_to_text(t) for t in selected_tables(tables, selection))


def lake_sink(
    sink_path: Any,
    *,
    lake_conn_id: str,
    staging_path: Any = None,
    routes: tuple[Any, Any] = (None, False),
    check: bool = False,
) -> SinkConfig:
    """The rendered ``sink_path`` with the lake connection's storage options (none when
    the connection is not defined), ``staging_path`` and ``routes`` (the rendered
    ``routes`` and ``routes_unique_keys``); with ``check``, refused unless it takes a
    write (:func:`~airflow_cdc.sinks.storage.write_check.check_writable`), so a wrong path,
    bucket or key fails before any Spark job starts."""
    # Imported when the task runs, not at every DAG parse.
    from airflow_cdc.sinks.storage.storage import is_local_uri

    root = str(sink_path or "").strip()
    staging = str(staging_path or "").strip()
    hook = CdcLakeHook(lake_conn_id)
    remote = not all(is_local_uri(uri) for uri in (root, staging) if uri)
    routed, unique = routes
    sink = SinkConfig(
        root=root,
        storage_options=hook.storage_options() if remote else {},
        staging_path=staging,
        routes={str(k): str(v) for k, v in as_mapping("routes", routed).items()},
        routes_unique_keys=as_bool("routes_unique_keys", unique),
    )
    if check:
        check_sink(sink, lake_conn_id=lake_conn_id if remote else None)
    return sink


def check_routes(sink: SinkConfig, schemas: Sequence[TableSchema]) -> None:
    """Refuse routes the planned tables cannot take: a table two routes take, a target that
    is also a table no route takes, a routed table without a key (not built yet)."""
    routing = sink.routing
    try:
        routing.check([schema.table for schema in schemas])
    except ValueError as exc:
        raise ConfigurationError(f"{exc} (the 'routes' setting)") from None
    keyless = [str(s.table) for s in schemas if s.keyless and routing.target_of(s.table)]
    if keyless:
        raise ConfigurationError(
            f"routes take tables without a key ({', '.join(keyless)}), which cannot be routed "
            "yet: leave them out of the 'routes' patterns"
        )


def check_sink(sink: SinkConfig, *, lake_conn_id: str | None = None) -> None:
    """The write check of the sink root and, when set apart, of the staging area."""
    # Imported when the task runs, not at every DAG parse.
    from airflow_cdc.sinks.storage.storage import Location
    from airflow_cdc.sinks.storage.write_check import check_writable

    check_writable(Location(sink.root, sink.storage_options), conn_id=lake_conn_id)
    if sink.staging_path:
        check_writable(
            Location(sink.staging_path, sink.storage_options),
            conn_id=lake_conn_id,
            what="staging_path",
        )


def lake_columns(
    columns: Any, masks: Any, *, mask_conn_id: str, change_metadata: Any = False
) -> LakeColumnsConfig:
    """The rendered ``columns``, ``masks`` and ``change_metadata``, checked; the mask key
    read from ``mask_conn_id`` only when a mask hashes."""
    given_columns, given_masks = _lake_params(columns, masks)
    hashes = parse_lake_rules(given_columns, given_masks).hashes
    key = CdcMaskHook(mask_conn_id).mask_key() if hashes else ""
    metadata = as_bool("change_metadata", change_metadata)
    return LakeColumnsConfig(given_columns, given_masks, key, change_metadata=metadata)


def lake_rules(columns: Any, masks: Any) -> LakeColumnRules:
    """The rendered ``columns`` and ``masks``, parsed (no key: what a table's Delta table
    holds, for lineage)."""
    return parse_lake_rules(*_lake_params(columns, masks))


def _lake_params(columns: Any, masks: Any) -> tuple[dict[str, Any], dict[str, str]]:
    given_masks = {name: str(mask) for name, mask in as_mapping("masks", masks).items()}
    return as_mapping("columns", columns), given_masks


def check_known_params(context: Any) -> None:
    """Refuse a run whose conf names a param the DAG does not have (a typo such as
    ``chunk_row`` would otherwise be ignored silently and the default used). The DAG's
    declared params, not ``context["params"]``: Airflow merges the conf into those."""
    params = getattr(context.get("dag"), "params", None)
    conf = getattr(context.get("dag_run"), "conf", None)
    if not conf or params is None:
        return
    unknown = sorted(str(key) for key in conf if key not in params)
    if unknown:
        raise ConfigurationError(
            f"unknown param(s) {unknown} in the run's conf; this DAG's params are "
            f"{sorted(params)} (a typo?)"
        )


def chunk_key_map(chunk_keys: Any, selection: TableSelection) -> dict[TableId, tuple[str, ...]]:
    """The rendered ``chunk_keys`` keyed by TableId; every table must be selected."""
    result: dict[TableId, tuple[str, ...]] = {}
    for name, columns in as_mapping("chunk_keys", chunk_keys).items():
        try:
            table = TableId.parse(name)
        except ValueError as exc:
            raise ConfigurationError(
                f"chunk_keys names {name!r}, which is not of the form 'database.table'"
            ) from exc
        if not selection.matches(table):
            raise ConfigurationError(
                f"chunk_keys names {name!r}, which is not one of the tables "
                f"({selection.describe()})"
            )
        cols = as_str_list(f"chunk_keys[{name!r}]", columns)
        if not cols:
            raise ConfigurationError(f"chunk_keys[{name!r}] is empty: give the key columns")
        result[table] = tuple(cols)
    return result


def key_range_given(key_range: Any) -> bool:
    """Whether the rendered ``key_range`` bounds anything (a form's empty fields render as
    ``""`` or ``"None"``)."""
    if key_range is None or key_range == "" or key_range == {} or key_range == "None":
        return False
    if isinstance(key_range, dict):
        return any(key_range.get(side) not in (None, "", "None", []) for side in ("lo", "hi"))
    return True


def key_range_data(key_range: Any) -> Any:
    """The rendered ``key_range`` with empty sides as None and rendered lists parsed."""
    value: Any = key_range
    if isinstance(value, dict):
        value = {
            side: (None if value.get(side) in (None, "", "None", []) else value.get(side))
            for side in ("lo", "hi")
        }
        for side in ("lo", "hi"):
            text = value[side]
            if isinstance(text, str) and text.strip().startswith("["):
                value[side] = parse_literal(text)  # a rendered list
    return value


@dataclass(frozen=True)
class PlanRequest:
    """A plan task's rendered arguments, checked (:func:`plan_request`)."""

    selection: TableSelection
    keys: dict[TableId, tuple[str, ...]]
    chunking: ChunkingConfig
    #: Whether ``key_range`` bounds anything (a backfill of a range).
    ranged: bool
    replace: bool
    startup: StartupConfig


def plan_request(
    selection: TableSelection,
    *,
    chunking: ChunkingConfig,
    startup: StartupConfig,
    key_range: Any,
    chunk_keys: Any,
    replace: Any,
) -> PlanRequest:
    """The rendered arguments of a plan task, refused when they contradict each other."""
    ranged = key_range_given(key_range)
    if ranged and selection.is_exact and len(selection.exact_tables()) != 1:
        raise ConfigurationError(
            f"key_range applies to one table, but {len(selection.exact_tables())} are "
            f"given: {[str(t) for t in selection.exact_tables()]}"
        )
    keys = chunk_key_map(chunk_keys, selection)
    replacing = as_bool("replace", replace)
    if replacing and ranged:
        raise ConfigurationError(
            "replace snapshots whole tables into replacement Delta tables: leave the key "
            "range empty"
        )
    if startup.mode is not StartupMode.INITIAL and (replacing or ranged):
        raise ConfigurationError(
            f"startup_mode {startup.mode.value!r} starts a pipeline; a backfill (key_range or "
            "replace) snapshots its tables: leave startup_mode 'initial'"
        )
    return PlanRequest(selection, keys, chunking, ranged, replacing, startup)
