"""A keyless table's history for the property tests of the keyless rules: operations on a
list of rows (duplicates and all), the binlog a server writes for them, and the table as a
``Counter`` after each. It is the oracle: it knows nothing of the rules it checks (no
import of ``airflow_cdc`` beyond the value types it builds events of)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from hypothesis import strategies as st

from airflow_cdc.model import BinlogPosition, ChangeEvent, ChangeKind, TableId

__all__ = ["COLUMNS", "TABLE", "History", "history", "operations", "position_after", "rows"]

TABLE = TableId("db", "log")
#: ``c`` is the chunking column (an indexed column, not unique), ``v`` the rest.
COLUMNS = ("c", "v")
Row = tuple[int, str]

#: Few distinct rows, so that a table holds many rows twice or more.
rows = st.tuples(st.integers(0, 9), st.sampled_from("ab"))
#: (what, the row it writes, which existing row it picks).
operations = st.lists(
    st.tuples(st.sampled_from(["insert", "delete", "update"]), rows, st.integers(0, 10**6)),
    max_size=60,
)


def position_of(number: int) -> BinlogPosition:
    """The position of the ``number``-th event (from 0)."""
    return BinlogPosition("b.000001", 1000 + 10 * number)


def position_after(count: int) -> BinlogPosition:
    """A transaction boundary after the first ``count`` events and before the next."""
    return BinlogPosition("b.000001", 995 + 10 * count)


@dataclass(frozen=True)
class History:
    events: list[ChangeEvent]
    #: ``states[i]``: the table after the first ``i`` events, as a multiset of rows.
    states: list[Counter[Row]]


def _image(row: Row) -> dict[str, object]:
    return dict(zip(COLUMNS, row, strict=True))


def history(initial: list[Row], ops: list[tuple[str, Row, int]]) -> History:
    """Replay ``ops`` on a table holding ``initial``: a delete or an update picks an
    existing row (an insert when there is none); an update may write the row it finds
    (the binlog has it, changing nothing)."""
    table = list(initial)
    events: list[ChangeEvent] = []
    states = [Counter(table)]
    for number, (what, row, pick) in enumerate(ops):
        at = position_of(number)
        if what == "insert" or not table:
            table.append(row)
            events.append(ChangeEvent(TABLE, ChangeKind.INSERT, at, None, _image(row)))
        elif what == "delete":
            old = table.pop(pick % len(table))
            events.append(ChangeEvent(TABLE, ChangeKind.DELETE, at, _image(old), None))
        else:
            index = pick % len(table)
            old, table[index] = table[index], row
            events.append(ChangeEvent(TABLE, ChangeKind.UPDATE, at, _image(old), _image(row)))
        states.append(Counter(table))
    return History(events, states)
