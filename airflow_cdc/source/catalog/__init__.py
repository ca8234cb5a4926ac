"""What the source's tables are, from ``information_schema``: their columns and chunk keys
(``tables``; which index gives the key, ``table_keys``, pure; a system-versioned table's
versioning apart, ``versioned_schema``, pure), their partitions (``partitions``), which of
them a selection picks and which it leaves out, and why (``listing``; the rule,
``followable``, pure), and which of them are an online schema change tool's shadows of
another (``shadow_tables``, pure).

The table reads are the package's own names (``load_table_schema``, ``load_table_schemas``,
``load_column_names``, ``load_table_indexes``, ``list_tables``, ``resolve_selection``,
``resolve_tables``, ``key_problem``, ``table_exists``), loaded on first use: the binlog
reader on a worker takes ``shadow_tables`` only.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_cdc.source.catalog.listing import list_tables, resolve_selection, resolve_tables
    from airflow_cdc.source.catalog.tables import (
        key_problem,
        load_column_names,
        load_table_indexes,
        load_table_schema,
        load_table_schemas,
        table_exists,
    )

#: Each name's module, imported on first use.
_HOMES = {
    "key_problem": "tables",
    "list_tables": "listing",
    "load_column_names": "tables",
    "load_table_indexes": "tables",
    "load_table_schema": "tables",
    "load_table_schemas": "tables",
    "resolve_selection": "listing",
    "resolve_tables": "listing",
    "table_exists": "tables",
}

__all__ = [
    "key_problem",
    "list_tables",
    "load_column_names",
    "load_table_indexes",
    "load_table_schema",
    "load_table_schemas",
    "resolve_selection",
    "resolve_tables",
    "table_exists",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
