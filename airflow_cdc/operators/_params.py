"""Coercion of rendered template values.

Templated fields render to strings unless the DAG sets ``render_template_as_native_obj``;
"{{ params.tables }}" then arrives as ``"['shop.orders']"``. These helpers accept both the
native value and its text form, so an operator works in either kind of DAG, and they raise
:class:`ConfigurationError` naming the field, because a wrong param is a user's typo to fix.
"""

from __future__ import annotations

import ast
import json
from typing import TYPE_CHECKING, Any

from airflow_cdc.errors import ConfigurationError

if TYPE_CHECKING:
    from airflow_cdc.config import SinkConfig
    from airflow_cdc.model import TableId, TableSelection

__all__ = [
    "as_mapping",
    "as_positive_int",
    "as_str_list",
    "check_sink",
    "lake_sink",
    "parse_literal",
    "selected_tables",
    "table_selection",
]


def parse_literal(text: str) -> Any:
    """JSON, else a Python literal (what Jinja renders a list or dict to), else the text."""
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    try:
        return ast.literal_eval(stripped)
    except (ValueError, SyntaxError):
        return text


def as_positive_int(name: str, value: Any, *, zero: bool = False) -> int:
    """A positive whole number (or 0 with ``zero=True``) from an int or its decimal text."""
    if isinstance(value, str):
        value = parse_literal(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if zero else 1):
        wanted = "0 or a positive whole number" if zero else "a positive whole number"
        raise ConfigurationError(f"{name} must be {wanted}, got {value!r}")
    return value


def as_str_list(name: str, value: Any) -> list[str]:
    """A list of non-empty strings from a list, its JSON/literal text, or comma-separated text."""
    if isinstance(value, str):
        parsed = parse_literal(value)
        value = parsed if isinstance(parsed, list | tuple) else value.split(",")
    if not isinstance(value, list | tuple):
        raise ConfigurationError(f"{name} must be a list of strings, got {value!r}")
    result: list[str] = []
    for item in value:
        if not isinstance(item, str):
            raise ConfigurationError(f"{name} must be a list of strings, got item {item!r}")
        if item.strip():
            result.append(item.strip())
    return result


def as_mapping(name: str, value: Any) -> dict[str, Any]:
    """A dict from a dict, its JSON/literal text, or ``None``/empty text (an empty dict)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return {}
    if isinstance(value, str):
        value = parse_literal(value)
    if not isinstance(value, dict):
        raise ConfigurationError(f"{name} must be a mapping, got {value!r}")
    return {str(k): v for k, v in value.items()}


def table_selection(include: Any, exclude: Any = None, *, name: str = "tables") -> TableSelection:
    """Rendered ``tables`` (and ``exclude_tables``) as a selection: names and patterns
    (``model.selection``); a wrong entry is named with the accepted forms."""
    from airflow_cdc.model import TableSelection

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


def selected_tables(tables: list[TableId], selection: TableSelection) -> list[TableId]:
    """``tables``, what ``selection`` picked on the server; refused when it is nothing."""
    if not tables:
        raise ConfigurationError(
            f"no table on the source matches {selection.describe()}; check the patterns "
            "(globs such as shop.*, or re:<regular expression>) and the CDC user's grants"
        )
    return tables


def lake_sink(
    sink_path: Any, *, lake_conn_id: str, staging_path: Any = None, check: bool = False
) -> SinkConfig:
    """The rendered ``sink_path`` with the lake connection's storage options (none when
    the connection is not defined) and ``staging_path``; with ``check``, refused unless it
    takes a write (:func:`~airflow_cdc.sinks.write_check.check_writable`), so a wrong path,
    bucket or key fails before any Spark job starts."""
    from airflow_cdc.config import SinkConfig
    from airflow_cdc.hooks import CdcLakeHook
    from airflow_cdc.sinks.storage import is_local_uri

    root = str(sink_path or "").strip()
    staging = str(staging_path or "").strip()
    hook = CdcLakeHook(lake_conn_id)
    remote = not all(is_local_uri(uri) for uri in (root, staging) if uri)
    sink = SinkConfig(
        root=root,
        storage_options=hook.storage_options() if remote else {},
        staging_path=staging,
    )
    if check:
        check_sink(sink, lake_conn_id=lake_conn_id if remote else None)
    return sink


def check_sink(sink: SinkConfig, *, lake_conn_id: str | None = None) -> None:
    """The write check of the sink root and, when set apart, of the staging area."""
    from airflow_cdc.sinks.storage import Location
    from airflow_cdc.sinks.write_check import check_writable

    check_writable(Location(sink.root, sink.storage_options), conn_id=lake_conn_id)
    if sink.staging_path:
        check_writable(
            Location(sink.staging_path, sink.storage_options),
            conn_id=lake_conn_id,
            what="staging_path",
        )
