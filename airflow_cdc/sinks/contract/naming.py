"""Names in paths and in delta-rs SQL.

Table paths: MySQL names may hold spaces, quotes, dots, slashes-free unicode, ``..``. Each
name becomes one path segment in which everything but ``[A-Za-z0-9_-]`` is written as
``~XX`` (the UTF-8 bytes in upper-case hex). Percent-encoding is not usable: delta-rs
decodes ``%XX`` in local paths (``db%20x`` is opened as ``db x``), so a table would be
created in one folder and read from another. ``~`` is itself escaped, so the mapping is
injective and deterministic.

SQL: delta-rs (DataFusion) accepts backtick-quoted identifiers with a doubled backtick
inside, the same rule as MySQL.
"""

from __future__ import annotations

import re

from airflow_cdc.model import TableId

__all__ = ["escape_segment", "quote_column", "table_path", "unescape_segment"]

_SAFE = re.compile(r"[A-Za-z0-9_-]")
_ESCAPE = re.compile(r"~([0-9A-F]{2})")


def escape_segment(name: str) -> str:
    """One path segment for a database or table name (never empty, never ``.``/``..``)."""
    if not name:
        raise ValueError("an empty database or table name has no sink path")
    out: list[str] = []
    for ch in name:
        if _SAFE.fullmatch(ch):
            out.append(ch)
        else:
            out.extend(f"~{byte:02X}" for byte in ch.encode("utf-8"))
    return "".join(out)


def table_path(root: str, table: TableId) -> str:
    """Where ``table``'s Delta table lives under the sink ``root``:
    ``<root>/<escaped database>/<escaped table>``."""
    return f"{root.rstrip('/')}/{escape_segment(table.database)}/{escape_segment(table.table)}"


def unescape_segment(segment: str) -> str:
    """Inverse of :func:`escape_segment` (for listing tables under a root)."""
    raw = bytearray()
    i = 0
    while i < len(segment):
        match = _ESCAPE.match(segment, i)
        if match:
            raw.append(int(match.group(1), 16))
            i = match.end()
        else:
            raw.extend(segment[i].encode("utf-8"))
            i += 1
    return raw.decode("utf-8")


def quote_column(name: str, alias: str | None = None) -> str:
    """A column reference for delta-rs predicates: ``alias.`name``` with backticks doubled."""
    quoted = "`" + name.replace("`", "``") + "`"
    return quoted if alias is None else f"{alias}.{quoted}"
