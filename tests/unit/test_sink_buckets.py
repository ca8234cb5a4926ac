"""Bucket numbers, path escaping and the retry loop: pure functions, no table."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest
from deltalake.exceptions import CommitFailedError, DeltaError
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.errors import SinkError
from airflow_cdc.model import TableId
from airflow_cdc.sinks.contract.base import check_column_names
from airflow_cdc.sinks.contract.naming import escape_segment, quote_column, unescape_segment
from airflow_cdc.sinks.delta.buckets import bucket_values, check_bucket_width
from airflow_cdc.sinks.delta.retry import RetryPolicy, is_commit_conflict, retry_conflicts

I64 = st.integers(-(2**63), 2**63 - 1)
U64 = st.integers(0, 2**64 - 1)


@given(st.lists(I64, max_size=50), st.integers(1, 2**40))
def test_signed_buckets_floor(values: list[int], width: int) -> None:
    got = bucket_values(pa.array(values, pa.int64()), width).to_pylist()
    assert got == [v // width for v in values]


@given(st.lists(U64, max_size=50), st.integers(2, 2**40))
def test_unsigned_buckets(values: list[int], width: int) -> None:
    assert bucket_values(pa.array(values, pa.uint64()), width).to_pylist() == [
        v // width for v in values
    ]
    as_decimal = pa.array([Decimal(v) for v in values], pa.decimal128(20, 0))
    assert bucket_values(as_decimal, width).to_pylist() == [v // width for v in values]


def test_bucket_limits() -> None:
    lo, hi, top = -(2**63), 2**63 - 1, 2**64 - 1
    assert bucket_values(pa.array([lo, hi], pa.int64()), 1).to_pylist() == [lo, hi]
    assert bucket_values(pa.array([lo, -1, hi], pa.int64()), 2**62).to_pylist() == [-2, -1, 1]
    assert bucket_values(pa.array([top], pa.uint64()), 2).to_pylist() == [top // 2]
    with pytest.raises(SinkError, match="larger width"):
        bucket_values(pa.array([top], pa.uint64()), 1)
    wide = pa.array([Decimal(-(10**25)), Decimal(10**25)], pa.decimal128(30, 0))
    assert bucket_values(wide, 10**10).to_pylist() == [-(10**15), 10**15]
    assert bucket_values(pa.array([-7, 7], pa.int8()), 3).to_pylist() == [-3, 2]
    assert bucket_values(pa.array(["a", "b"]), None).to_pylist() == [0, 0]
    with pytest.raises(SinkError, match="nulls"):
        bucket_values(pa.array([1, None], pa.int64()), 3)


def test_bucket_width_checks() -> None:
    with pytest.raises(SinkError, match="2 or more"):
        check_bucket_width(1, pa.decimal128(20, 0), "id")
    with pytest.raises(SinkError, match="positive"):
        check_bucket_width(0, pa.int64(), "id")
    with pytest.raises(SinkError, match="cannot be bucketed"):
        check_bucket_width(10, pa.string(), "id")
    check_bucket_width(1, pa.int64(), "id")


@given(st.text(min_size=1))
def test_escape_roundtrip_and_safe(name: str) -> None:
    segment = escape_segment(name)
    assert unescape_segment(segment) == name
    assert all(ch.isascii() and (ch.isalnum() or ch in "_-~") for ch in segment)
    assert segment not in {".", ".."}


def test_escape_is_injective_on_tricky_names() -> None:
    names = ["a b", "a~20b", "a.b", "a~2Eb", "..", "%20", "é", "~"]
    assert len({escape_segment(n) for n in names}) == len(names)
    assert escape_segment("a b") == "a~20b"


def test_quote_column() -> None:
    assert quote_column("order`id", "t") == "t.`order``id`"
    assert quote_column("a.b") == "`a.b`"


def test_column_name_check_is_case_insensitive() -> None:
    with pytest.raises(SinkError, match="_CDC_POSITION"):
        check_column_names(TableId("d", "t"), ["id", "_CDC_POSITION"])
    check_column_names(TableId("d", "t"), ["id", "cdc_position", "pos"])


def test_retry_until_success_and_deadline() -> None:
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise CommitFailedError("Commit failed: a concurrent transactions added new data")
        return "done"

    slept: list[float] = []
    assert retry_conflicts(flaky, "t", sleep=slept.append) == ("done", 3)
    assert len(slept) == 2
    assert all(s >= 0 for s in slept)

    now = [0.0]

    def always() -> None:
        now[0] += 10
        raise CommitFailedError("conflict")

    with pytest.raises(SinkError, match="still losing commit races"):
        retry_conflicts(
            always, "t", RetryPolicy(deadline=30), sleep=lambda s: None, clock=lambda: now[0]
        )

    def broken() -> None:
        raise DeltaError("Schema error: no field named x")

    with pytest.raises(DeltaError):
        retry_conflicts(broken, "t", sleep=lambda s: None)
    assert not is_commit_conflict(ValueError("conflict"))


@given(st.lists(st.integers(0, 4), max_size=40), st.booleans())
def test_rows_split_by_bucket_keep_each_row_once_in_its_bucket(
    buckets: list[int], ordered: bool
) -> None:
    from airflow_cdc.sinks.delta.files import _by_bucket

    if ordered:  # a key-ordered read: slices
        buckets = sorted(buckets)
    rows = pa.table({"i": list(range(len(buckets))), "b": buckets})
    parts = _by_bucket(rows, pa.array(buckets, pa.int64()))
    assert sorted(bucket for bucket, _ in parts) == sorted(set(buckets))
    for bucket, part in parts:
        assert set(part.column("b").to_pylist()) == {bucket}
    assert sorted(i for _, part in parts for i in part.column("i").to_pylist()) == list(
        range(len(buckets))
    )
