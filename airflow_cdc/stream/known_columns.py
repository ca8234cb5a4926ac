"""Which columns the stream reads each table with at a batch's start (plain Python).

Not the catalog's as such: the catalog tells the columns now, and a stream that stands
behind an ``ALTER`` (a replayed batch, a restart while the table changed) must read the row
images before it with the columns before it. The schema history (``metadata.
schema_history``: the chunks' columns at their high watermarks, and each change of columns
the stream carried out) tells them; a table with no history (snapshotted by an earlier
version) is read with the catalog's.
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.schema_history import History, schemas_at
from airflow_cdc.model import BinlogPosition, TableId, TableSchema

__all__ = ["KnownColumns"]


class KnownColumns:
    """The schema history of the tables read, kept between batches and read again only
    when a row was recorded (one small query a batch otherwise)."""

    def __init__(self) -> None:
        self._history: History = {}
        self._read: set[TableId] = set()
        self._stamp: tuple[int, object] | None = None

    def __getstate__(self) -> dict[str, object]:
        return {"_history": {}, "_read": set(), "_stamp": None}

    def at(
        self, store: MetadataStore, tables: Sequence[TableId], position: BinlogPosition
    ) -> dict[TableId, TableSchema]:
        """The recorded columns of each of ``tables`` to read its changes after
        ``position`` with (a table without history is left out)."""
        stamp = store.schema_history.stamp()
        if stamp != self._stamp:
            self._history, self._read, self._stamp = {}, set(), stamp
        unread = [t for t in tables if t not in self._read]
        if unread:
            self._history.update(store.schema_history.read(unread))
            self._read.update(unread)
        return schemas_at({t: self._history[t] for t in tables if t in self._history}, position)
