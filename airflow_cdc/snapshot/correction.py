"""Chunk correction (Flink CDC 2.0): bring rows read between the watermarks to the state
at the high watermark by replaying the binlog events of the window.

The rule, per event in binlog order: a before-image whose key lies in the chunk removes
that key; an after-image whose key lies in the chunk puts that row. The last event that
touches a key decides it, so only the window's final word per key is needed (``fold``),
and it can be applied to the rows as they were read by any read view at or after the low
watermark (``rows_at_high_watermark``).

Example, chunk [10, 20), rows read {11: a, 12: b}, window: update 11 a->a2, delete 12,
update key 13->25 (leaves the chunk), insert 14: fold = {11: a2, 12: DELETED, 13: DELETED,
14: row}, result {11: a2, 14: row}; 12 and 13 become delete markers in the sink.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, Final, TypeVar

from airflow_cdc.model import ChangeEvent, Key, Row

__all__ = ["DELETED", "Deleted", "fold", "rows_at_high_watermark"]

K = TypeVar("K", bound=Hashable)


class _Deleted:
    """Type of :data:`DELETED`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "DELETED"


#: The final word of the window for a key that does not exist at the high watermark.
DELETED: Final = _Deleted()
Deleted = _Deleted


def fold(
    events: Iterable[ChangeEvent],
    key_of: Callable[[Row], Key],
    in_chunk: Callable[[Key], bool],
) -> dict[Key, Row | _Deleted]:
    """The last word of the window for every key of the chunk that an event touched."""
    final: dict[Key, Row | _Deleted] = {}
    for event in events:
        if event.before is not None:
            key = key_of(event.before)
            if in_chunk(key):
                final[key] = DELETED
        if event.after is not None:
            key = key_of(event.after)
            if in_chunk(key):
                final[key] = event.after
    return final


def rows_at_high_watermark(rows: Mapping[K, Any], final: Mapping[K, Any]) -> dict[K, Any]:
    """Reference semantics on plain dicts (used by the property tests and small chunks):
    the chunk's rows at the high watermark."""
    result = {key: row for key, row in rows.items() if key not in final}
    result.update({key: row for key, row in final.items() if row is not DELETED})
    return result
