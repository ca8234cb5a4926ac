"""The correction rule, checked against a plain replay of the binlog on a model database."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.model import BinlogPosition, ChangeEvent, ChangeKind, TableId
from airflow_cdc.snapshot.correction import DELETED, fold, rows_at_high_watermark

TABLE = TableId("db", "t")
LO, HI = 10, 20  # the chunk [10, 20) of keys 0..29


def key_of(row: dict[str, int]) -> tuple[int]:
    return (row["id"],)


def in_chunk(key: tuple[int]) -> bool:
    return LO <= key[0] < HI


# A random history of single-row operations on keys 0..29: (op, key, new_key, value).
ops = st.lists(
    st.tuples(
        st.sampled_from(["upsert", "delete", "move"]),
        st.integers(0, 29),
        st.integers(0, 29),
        st.integers(),
    ),
    max_size=60,
)


def replay(
    ops_list: list[tuple[str, int, int, int]], start: dict[int, int]
) -> tuple[dict[int, int], list[ChangeEvent]]:
    """Apply the operations to a model table, emitting the binlog events a server would."""
    state = dict(start)
    events: list[ChangeEvent] = []
    for n, (op, key, new_key, value) in enumerate(ops_list):
        pos = BinlogPosition("b.000001", 1000 + n)
        if op == "upsert":
            if key in state:
                events.append(
                    ChangeEvent(
                        TABLE,
                        ChangeKind.UPDATE,
                        pos,
                        {"id": key, "v": state[key]},
                        {"id": key, "v": value},
                    )
                )
            else:
                events.append(
                    ChangeEvent(TABLE, ChangeKind.INSERT, pos, None, {"id": key, "v": value})
                )
            state[key] = value
        elif op == "delete" and key in state:
            events.append(
                ChangeEvent(TABLE, ChangeKind.DELETE, pos, {"id": key, "v": state.pop(key)}, None)
            )
        elif op == "move" and key in state and new_key not in state:
            old = state.pop(key)
            events.append(
                ChangeEvent(
                    TABLE,
                    ChangeKind.UPDATE,
                    pos,
                    {"id": key, "v": old},
                    {"id": new_key, "v": value},
                )
            )
            state[new_key] = old if value is None else value
    return state, events


@settings(max_examples=300)
@given(before_low=ops, between=ops, read_after=st.integers(0, 60))
def test_correction_gives_the_state_at_the_high_watermark(
    before_low: list[tuple[str, int, int, int]],
    between: list[tuple[str, int, int, int]],
    read_after: int,
) -> None:
    # State at the low watermark, then a window of events; the read sees the state after
    # some prefix of the window (any read view between the watermarks).
    at_low, _ = replay(before_low, {})
    at_high, window = replay(between, at_low)
    seen_by_read, _ = replay(between[:read_after], at_low)
    rows_read = {(k,): {"id": k, "v": v} for k, v in seen_by_read.items() if LO <= k < HI}

    corrected = rows_at_high_watermark(rows_read, fold(window, key_of, in_chunk))

    expected = {(k,): {"id": k, "v": v} for k, v in at_high.items() if LO <= k < HI}
    assert corrected == expected


def test_example_from_the_docstring() -> None:
    p = BinlogPosition("b.000001", 100)
    window = [
        ChangeEvent(
            TABLE, ChangeKind.UPDATE, p.at_row(1), {"id": 11, "v": "a"}, {"id": 11, "v": "a2"}
        ),
        ChangeEvent(TABLE, ChangeKind.DELETE, p.at_row(2), {"id": 12, "v": "b"}, None),
        ChangeEvent(
            TABLE, ChangeKind.UPDATE, p.at_row(3), {"id": 13, "v": "c"}, {"id": 25, "v": "c"}
        ),
        ChangeEvent(TABLE, ChangeKind.INSERT, p.at_row(4), None, {"id": 14, "v": "d"}),
    ]
    final = fold(window, key_of, in_chunk)
    assert final == {
        (11,): {"id": 11, "v": "a2"},
        (12,): DELETED,
        (13,): DELETED,
        (14,): {"id": 14, "v": "d"},
    }
    rows = {(11,): {"id": 11, "v": "a"}, (12,): {"id": 12, "v": "b"}, (13,): {"id": 13, "v": "c"}}
    assert rows_at_high_watermark(rows, final) == {
        (11,): {"id": 11, "v": "a2"},
        (14,): {"id": 14, "v": "d"},
    }


def test_no_event_keeps_rows_as_read() -> None:
    rows = {(11,): {"id": 11}}
    assert rows_at_high_watermark(rows, fold([], key_of, in_chunk)) == rows
