"""Changes written under another table schema than the sink's (pure).

Each binlog row image carries the columns the table had when the change was written
(``binlog_row_metadata=FULL``). After an ``ALTER TABLE`` (ADD/DROP/RENAME COLUMN, a new
primary key) they differ from the columns of the sink table, which were the table's when
it was snapshotted. Such a change must never be merged as if nothing had happened: a
renamed column would turn into NULLs, an added one would vanish. The rule:

* a drifted change that a chunk already holds (the emit filter drops it: it lies before a
  newer snapshot's high watermark) is dropped; this is how a stream gets past an ALTER once
  the table is snapshotted again;
* a drifted change that would have to be applied stops the stream with
  :class:`~airflow_cdc.errors.SchemaChangedError`, naming the columns and the way on.

A type change under the same column names (``MODIFY``) is not visible in the images: the
stream sees it as the DDL statement at its position (``stream.in_binlog_order``). And a stream
that (re)starts after an ALTER loads today's columns, which its images then match: it
compares them with the Delta table's own columns and key (:func:`sink_drift`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from airflow_cdc.errors import SchemaChangedError
from airflow_cdc.model import BinlogPosition, ChangeEvent, Key, TableId, TableSchema

__all__ = [
    "Drift",
    "image_drift",
    "needed",
    "screen_events",
    "sink_drift",
    "way_on",
]


@dataclass(frozen=True, slots=True)
class Drift:
    """How the columns of a change (or of the catalog) differ from the sink's schema."""

    added: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    key: tuple[str, ...] | None = None  # the new key, when it changed

    def __bool__(self) -> bool:
        return bool(self.added or self.dropped or self.key is not None)

    def describe(self) -> str:
        parts = []
        if self.added:
            parts.append(f"new columns {list(self.added)}")
        if self.dropped:
            parts.append(f"columns no longer there {list(self.dropped)}")
        if self.key is not None:
            parts.append(f"a new key {list(self.key)}")
        return "; ".join(parts) or "no change"


def image_drift(schema: TableSchema, image: Mapping[str, object]) -> Drift:
    """The columns of one row image against ``schema`` (a rename shows as added + dropped)."""
    names = [column.name for column in schema.columns]
    return Drift(
        added=tuple(name for name in image if name not in names),
        dropped=tuple(name for name in names if name not in image),
    )


def sink_drift(columns: Sequence[str], key: Sequence[str], schema: TableSchema) -> Drift:
    """``schema`` (the catalog's, as the stream loaded it) against the columns and key the
    Delta table was written with."""
    names = [column.name for column in schema.columns]
    return Drift(
        added=tuple(name for name in names if name not in columns),
        dropped=tuple(name for name in columns if name not in names),
        key=schema.key if tuple(key) != schema.key else None,
    )


def way_on(table: TableId) -> str:
    return (
        f"Way on: trigger mysql_cdc_backfill for {table} with replace (it snapshots the table "
        "into a replacement Delta table with its columns now; the stream leaves the table "
        "until that is done, then joins it anew), then clear the stream task"
    )


def screen_events(
    events: Iterable[ChangeEvent],
    schemas: Mapping[TableId, TableSchema],
    should_emit: Callable[[TableId, Key, BinlogPosition], bool],
    on_drift: Callable[[ChangeEvent, Drift], None] | None = None,
) -> Iterator[ChangeEvent]:
    """The events to apply, lazily: drifted ones that a chunk holds are left out; one that
    must be applied raises :class:`SchemaChangedError`, or with ``on_drift`` is handed to it
    and left out. Events of tables without a schema pass. (Images of one table share a few
    column layouts: each is compared once.)"""
    layouts: dict[tuple[TableId, tuple[str, ...]], Drift] = {}
    for event in events:
        schema = schemas.get(event.table)
        if schema is None:
            yield event
            continue
        drift: Drift | None = None
        for image in (event.before, event.after):
            if not image:
                continue
            layout = (event.table, tuple(image))
            found = layouts.get(layout)
            if found is None:
                found = layouts[layout] = image_drift(schema, image)
            if found:
                drift = found
                break
        if drift is None:
            yield event
            continue
        if not needed(event, schema, should_emit):
            continue
        if on_drift is not None:
            on_drift(event, drift)
            continue
        raise SchemaChangedError(
            f"{event.table} changed under the stream: the change at {event.position} has "
            f"{drift.describe()} compared with the sink table's columns. Nothing of this batch "
            f"was applied. {way_on(event.table)}"
        )


def needed(
    event: ChangeEvent,
    schema: TableSchema,
    should_emit: Callable[[TableId, Key, BinlogPosition], bool],
) -> bool:
    """Whether the sink still needs the change (any image's key; unknown key: needed)."""
    for image in (event.before, event.after):
        if image is None:
            continue
        key = _key(schema.key, image)
        if key is None or should_emit(event.table, key, event.position):
            return True
    return False


def _key(columns: Sequence[str], image: Mapping[str, object]) -> Key | None:
    if any(name not in image for name in columns):
        return None
    return tuple(image[name] for name in columns)  # type: ignore[misc]
