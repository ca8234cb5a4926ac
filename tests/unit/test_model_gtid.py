"""GTID states (``model.gtid``): text round trips, and ``covers``/``missing`` checked against
plain sets of transactions (MySQL) and per-domain numbers (MariaDB)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.model.gtid import MariaGtid, MariaGtidPos, MysqlGtidSet

UUIDS = ("3e11fa47-71ca-11e1-9e33-c80aa9429562", "0b4f1a2c-0000-4000-8000-00000000abcd")
SOURCES = (UUIDS[0], UUIDS[1], f"{UUIDS[1]}:blue")

maria_gtids = st.builds(MariaGtid, st.integers(0, 3), st.integers(1, 4), st.integers(1, 50))
maria_positions = st.lists(maria_gtids, max_size=6).map(MariaGtidPos.of)
# A MySQL set as the plain set of the transactions it holds.
transactions = st.sets(st.tuples(st.sampled_from(SOURCES), st.integers(1, 40)), max_size=30)


def mysql_set(held: set[tuple[str, int]]) -> MysqlGtidSet:
    numbers: dict[str, list[tuple[int, int]]] = {}
    for source, n in held:
        numbers.setdefault(source, []).append((n, n))
    return MysqlGtidSet.of(numbers)


def held(gtids: MysqlGtidSet) -> set[tuple[str, int]]:
    return {(s, n) for s, intervals in gtids.sources for a, b in intervals for n in range(a, b + 1)}


@given(maria_positions)
def test_maria_position_text_round_trip(position: MariaGtidPos) -> None:
    assert MariaGtidPos.parse(str(position)) == position


@given(maria_positions, maria_positions)
def test_maria_covers_per_domain(a: MariaGtidPos, b: MariaGtidPos) -> None:
    mine = a.seqs()
    assert a.covers(b) == all(mine.get(d, 0) >= seq for d, seq in b.seqs().items())
    assert {g.domain for g in a.missing(b)} == {
        d for d, seq in b.seqs().items() if mine.get(d, 0) < seq
    }
    assert a.covers(a)


@given(maria_positions, maria_gtids)
def test_maria_advanced_holds_the_new_transaction(position: MariaGtidPos, gtid: MariaGtid) -> None:
    after = position.advanced(gtid)
    assert after.seqs()[gtid.domain] == gtid.seq
    assert MariaGtidPos((gtid,)).covers(MariaGtidPos((gtid,)))
    assert after.covers(MariaGtidPos((gtid,)))


@given(transactions)
def test_mysql_set_text_round_trip(transactions: set[tuple[str, int]]) -> None:
    gtids = mysql_set(transactions)
    assert MysqlGtidSet.parse(str(gtids)) == gtids
    assert held(gtids) == transactions


@given(transactions, transactions)
def test_mysql_covers_missing_and_union_are_set_operations(
    a: set[tuple[str, int]], b: set[tuple[str, int]]
) -> None:
    x, y = mysql_set(a), mysql_set(b)
    assert x.covers(y) == (b <= a)
    assert held(x.missing(y)) == b - a
    assert held(x.union(y)) == a | b


def test_server_texts_parse() -> None:
    executed = MysqlGtidSet.parse(
        "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5:7-9:11,\n"
        "0b4f1a2c-0000-4000-8000-00000000abcd:1-3:blue:5-6"
    )
    assert str(executed) == (
        "0b4f1a2c-0000-4000-8000-00000000abcd:1-3:blue:5-6,"
        "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7-9:11"
    )
    assert not executed.covers(MysqlGtidSet.parse(f"{UUIDS[0]}:6"))
    assert str(executed.missing(MysqlGtidSet.parse(f"{UUIDS[0]}:4-12"))) == f"{UUIDS[0]}:6:10:12"
    assert MysqlGtidSet.parse("") == MysqlGtidSet()
    assert str(MariaGtidPos.parse("1-2-5,0-1-100")) == "0-1-100,1-2-5"
    assert MariaGtidPos.parse("") == MariaGtidPos()


@pytest.mark.parametrize("text", ["0-1", "0-1-x", "0-1-5,0-2-6", "a-b-c"])
def test_bad_maria_text_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="GTID"):
        MariaGtidPos.parse(text)


@pytest.mark.parametrize(
    "text", ["nonsense:1-5", f"{UUIDS[0]}:5-3", f"{UUIDS[0]}:0", f"{UUIDS[0]}:1-x"]
)
def test_bad_mysql_text_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="GTID"):
        MysqlGtidSet.parse(text)
