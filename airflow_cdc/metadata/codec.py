"""How values are written into the metadata DB's columns and read back.

Kept apart from the queries so the stored forms (which outlive any one version of the code)
are defined in one place: keys as ``model.encode_key`` JSON, positions as
``BinlogPosition.to_text()``, tables as ``db.table`` with backticks where a name needs them,
times as naive UTC.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import asdict, fields
from typing import Any

from airflow_cdc.errors import MetadataError
from airflow_cdc.model import (
    BinlogPosition,
    Column,
    Key,
    Partition,
    Partitioning,
    SystemVersioning,
    TableId,
    TableSchema,
    decode_key,
    encode_key,
)

__all__ = [
    "as_utc",
    "decode_key_text",
    "decode_position",
    "encode_key_text",
    "encode_position",
    "from_db_time",
    "names_from_text",
    "names_to_text",
    "position_sort_text",
    "schema_from_text",
    "schema_to_text",
    "table_from_text",
    "table_to_text",
    "to_db_time",
    "utc_now",
]

#: Width of :func:`position_sort_text`; the sink's decimal(38, 0) never needs more.
_SORT_DIGITS = 38


def table_to_text(table: TableId) -> str:
    """``db.table``; a part holding a dot or a backtick is backtick-quoted so
    :meth:`TableId.parse` reads it back unchanged."""
    return f"{_part(table.database)}.{_part(table.table)}"


def _part(name: str) -> str:
    if "." in name or "`" in name:
        return "`" + name.replace("`", "``") + "`"
    return name


def table_from_text(text: str) -> TableId:
    return TableId.parse(text)


def encode_key_text(key: Key | None) -> str | None:
    """JSON text of a range bound; SQL NULL stands for unbounded."""
    return None if key is None else json.dumps(encode_key(key), separators=(",", ":"))


def decode_key_text(text: str | None) -> Key | None:
    return None if text is None else decode_key(json.loads(text))


def names_to_text(names: Sequence[str]) -> str:
    """JSON list of column names (a plan's key columns)."""
    return json.dumps(list(names))


def names_from_text(text: str) -> list[str]:
    value = json.loads(text)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise MetadataError(f"expected a JSON list of names in the metadata DB, got {text!r}")
    return value


def schema_to_text(schema: TableSchema | None) -> str | None:
    """A table's columns and key as JSON (each column by its fields' names). ``keyless``,
    ``partitioning`` and ``versioning`` are written only when set: a keyed table's text
    stays what it was before they existed, so older records read the same and compare equal
    (``metadata.schema_history.write_schema`` skips a record equal to the newest)."""
    if schema is None:
        return None
    value: dict[str, Any] = {
        "table": table_to_text(schema.table),
        "columns": [asdict(column) for column in schema.columns],
        "key": list(schema.key),
    }
    if schema.keyless:
        value["keyless"] = True
    if schema.partitioning is not None:
        value["partitioning"] = asdict(schema.partitioning)
    if schema.versioning is not None:
        value["versioning"] = asdict(schema.versioning)
    return json.dumps(value)


def schema_from_text(text: str | None) -> TableSchema | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
        known = {f.name for f in fields(Column)}
        columns = tuple(
            Column(**{k: v for k, v in column.items() if k in known}) for column in value["columns"]
        )
        table, key = table_from_text(value["table"]), tuple(value["key"])
        keyless = value.get("keyless", False)  # absent: written before keyless tables
        if not isinstance(keyless, bool):
            raise TypeError(f"keyless is {keyless!r}")
        partitioning = _partitioning(value.get("partitioning"))
        versioning = value.get("versioning")  # absent: not system-versioned
        return TableSchema(
            table,
            columns,
            key,
            partitioning,
            keyless=keyless,
            versioning=None if versioning is None else SystemVersioning(**versioning),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise MetadataError(f"unreadable table schema in the metadata DB: {text[:200]!r}") from exc


def _partitioning(value: dict[str, Any] | None) -> Partitioning | None:
    if value is None:
        return None
    partitions = tuple(Partition(**p) for p in value["partitions"])
    return Partitioning(
        value["method"], value["expression"], partitions, bool(value.get("subpartitioned"))
    )


def encode_position(position: BinlogPosition | None) -> str | None:
    return None if position is None else position.to_text()


def decode_position(text: str | None) -> BinlogPosition | None:
    return None if text is None else BinlogPosition.from_text(text)


def position_sort_text(position: BinlogPosition | None) -> str | None:
    """Zero-padded ``BinlogPosition.encode()``: sorts as text in the positions' order on every
    database, where the integer (up to 28 digits) would overflow a BIGINT."""
    return None if position is None else f"{position.encode():0{_SORT_DIGITS}d}"


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def to_db_time(value: dt.datetime | None) -> dt.datetime | None:
    """Naive UTC: the one form every database's plain DATETIME/TIMESTAMP keeps unchanged."""
    if value is None:
        return None
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def as_utc(value: dt.datetime) -> dt.datetime:
    """``value`` with a time zone: a naive one is UTC (as every time the store keeps)."""
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def from_db_time(value: dt.datetime | None) -> dt.datetime | None:
    return None if value is None else value.replace(tzinfo=dt.UTC)
