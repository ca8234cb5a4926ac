"""The rules of verify (``airflow_cdc.verify``), pure: sums of fingerprints, prefixes and the
narrowing of a difference to keys, the canonical forms per type, the repair's plan."""

from __future__ import annotations

import hashlib
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.config import VerifySettings
from airflow_cdc.errors import ConfigurationError
from airflow_cdc.model import ChunkRange, Column, TableId, TablePlan, TableSchema
from airflow_cdc.verify.canonical import (
    HASH_MODULUS,
    column_form,
    duckdb_row_hash,
    mysql_row_hash,
    notes,
)
from airflow_cdc.verify.digest_prefixes import (
    MAX_LEVEL,
    Differences,
    differing,
    held_rows,
    next_step,
    prefix_width,
    row_differences,
)
from airflow_cdc.verify.repair import repair_plan
from airflow_cdc.verify.sums import RangeSum

fingerprints = st.lists(st.integers(0, HASH_MODULUS - 1), max_size=40)


@given(fingerprints, st.randoms(use_true_random=False))
def test_a_sum_does_not_depend_on_order_or_split(rows: list[int], rng: random.Random) -> None:
    whole = RangeSum.of(rows)
    shuffled = list(rows)
    rng.shuffle(shuffled)
    cut = rng.randint(0, len(rows))
    assert RangeSum.of(shuffled) == whole
    assert RangeSum.of(shuffled[:cut]).plus(RangeSum.of(shuffled[cut:])) == whole
    assert whole.minus(RangeSum.of(shuffled[:cut])) == RangeSum.of(shuffled[cut:])
    assert 0 <= whole.total < HASH_MODULUS


prefixes = st.sampled_from(["00", "3f", "a0", "ff"])
#: key -> (its prefix, its value); a row's fingerprint hashes its key and value, as the
#: canonical text holds both.
rows_of = st.dictionaries(st.integers(0, 50), st.tuples(prefixes, st.integers(0, 3)))


def fingerprint(key: int, value: int) -> int:
    return int.from_bytes(hashlib.blake2b(f"{key}|{value}".encode(), digest_size=8).digest())


def sums(rows: dict[int, tuple[str, int]]) -> dict[str, RangeSum]:
    found: dict[str, RangeSum] = {}
    for key, (prefix, value) in rows.items():
        found[prefix] = found.get(prefix, RangeSum()).plus(RangeSum(1, fingerprint(key, value)))
    return found


@settings(max_examples=200)
@given(rows_of, rows_of)
def test_differing_buckets_are_those_whose_rows_differ(
    source: dict[int, tuple[str, int]], lake: dict[int, tuple[str, int]]
) -> None:
    def of(rows: dict[int, tuple[str, int]], prefix: str) -> set[tuple[int, int]]:
        return {(k, f) for k, (b, f) in rows.items() if b == prefix}

    expected = sorted(b for b in {"00", "3f", "a0", "ff"} if of(source, b) != of(lake, b))
    # 64-bit fingerprints: two different row sets summing alike is out of reach here
    assert differing(sums(source), sums(lake)) == expected


def test_narrowing_lists_rows_once_few_are_left_or_no_level_is() -> None:
    source = {"3f": RangeSum(40, 1), "a0": RangeSum(3000, 2)}
    lake = {"3f": RangeSum(41, 9), "a0": RangeSum(3000, 5)}
    assert next_step(source, lake, ["3f"], 1, list_rows=100) == "rows"
    assert next_step(source, lake, ["3f", "a0"], 1, list_rows=100) == "deeper"
    assert next_step(source, lake, ["3f", "a0"], MAX_LEVEL, list_rows=100) == "rows"
    assert [prefix_width(level) for level in (0, 1, 2)] == [0, 2, 4]
    with pytest.raises(ValueError, match="outside"):
        prefix_width(MAX_LEVEL + 1)


level_sums = st.dictionaries(
    st.sampled_from(["00", "3f", "a0", "ff"]), st.integers(0, 10_000).map(lambda n: RangeSum(n))
)


@given(
    level_sums,
    level_sums,
    st.integers(0, MAX_LEVEL),
    st.integers(1, 5_000),
    st.none() | st.integers(0, 40_000),
)
def test_narrowing_goes_deeper_only_while_it_narrows(
    source: dict[str, RangeSum],
    lake: dict[str, RangeSum],
    level: int,
    list_rows: int,
    before: int | None,
) -> None:
    """Deeper while the differing prefixes hold more than ``list_rows`` rows, a level is
    left, and they hold fewer rows than the prefixes a level up (a deeper pass would not
    narrow rows that all lie in differing prefixes: many differing rows, or one row of a
    table without a key held many times)."""
    bad = differing(source, lake)
    held = held_rows(source, lake, bad)
    assert held == max(sum(s.get(b, RangeSum()).rows for b in bad) for s in (source, lake))
    narrows = before is None or held < before
    deeper = held > list_rows and level < MAX_LEVEL and narrows
    assert next_step(source, lake, bad, level, list_rows, before) == (
        "deeper" if deeper else "rows"
    )


listings = st.dictionaries(st.sampled_from(list("abcdefgh")), st.integers(0, 3), max_size=8).map(
    lambda rows: {text: (h, 1, (text,)) for text, h in rows.items()}
)


@given(listings, listings)
def test_row_differences_are_the_set_differences(
    source: dict[str, tuple[int, int, tuple[str]]], lake: dict[str, tuple[int, int, tuple[str]]]
) -> None:
    found = row_differences(source, lake)
    assert set(found.missing) == {(t,) for t in set(source) - set(lake)}
    assert set(found.extra) == {(t,) for t in set(lake) - set(source)}
    assert set(found.changed) == {
        (t,) for t in set(source) & set(lake) if source[t][0] != lake[t][0]
    }
    assert bool(found) == (source != lake)


def test_differences_describe_their_keys() -> None:
    found = Differences(missing=((7,),), extra=((1, "a"),), changed=tuple((k,) for k in range(12)))
    text = found.describe(shown=3)
    assert "1 missing in the lake (7)" in text
    assert "1 only in the lake ((1, 'a'))" in text
    assert "12 with other values (0, 1, 2 and 9 more)" in text
    assert Differences().describe() == "none"


MAPPED = [
    ("int", "int(11)"), ("bigint", "bigint(20) unsigned"), ("bit", "bit(1)"), ("bit", "bit(12)"),
    ("decimal", "decimal(65,30)"), ("float", "float"), ("double", "double"), ("date", "date"),
    ("datetime", "datetime(6)"), ("timestamp", "timestamp"), ("time", "time(6)"),
    ("year", "year(4)"), ("varchar", "varchar(9)"), ("json", "longtext"), ("set", "set('a')"),
    ("enum", "enum('a')"), ("binary", "binary(4)"), ("blob", "blob"), ("point", "point"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "full"), MAPPED)
def test_every_type_of_the_mapping_has_a_form(kind: str, full: str) -> None:
    form = column_form(Column("c", kind, full, True))
    assert form.mysql
    assert form.duckdb
    assert form.free == (kind in {"varchar", "json", "set", "enum"})
    assert bool(form.note) == (kind in {"float", "double"})


def test_a_type_it_cannot_hash_is_named() -> None:
    with pytest.raises(ValueError, match=r"vector.*cannot hash"):
        column_form(Column("v", "vector", "vector(3)", True))


def test_not_null_columns_need_no_null_marker() -> None:
    schema = TableSchema(
        TableId("d", "t"),
        (
            Column("id", "int", "int", False),
            Column("v", "varchar", "varchar(9)", True, charset="utf8mb4"),
        ),
        ("id",),
    )
    row = mysql_row_hash(schema)
    assert "COALESCE(`id`" not in row
    assert "COALESCE(CONCAT(CHAR_LENGTH(`v`)" in row
    assert 'coalesce(CAST(length("v")' in duckdb_row_hash(schema)
    assert notes(schema) == []


def test_a_repair_is_one_scattered_plan_never_a_full_one() -> None:
    table = TableId("d", "t")
    schema = TableSchema(table, (Column("id", "int", "int", False),), ("id",))
    ranges = [ChunkRange(None, (3,)), ChunkRange((10,), (11,)), ChunkRange((90,), None)]
    (plan,) = repair_plan(schema, ranges)
    assert plan.method == "scattered"
    assert plan.ranges == tuple(ranges)
    assert not plan.is_full
    assert repair_plan(schema, []) == []
    with pytest.raises(ValueError, match="gap"):
        TablePlan(table, ("id",), tuple(ranges), 3, "single")


@pytest.mark.parametrize(
    "bad", [{"parallelism": 0}, {"range_rows": 0}, {"rows_per_second": -1}, {"list_rows": 0}]
)
def test_settings_refuse_what_cannot_work(bad: dict[str, int]) -> None:
    with pytest.raises(ConfigurationError):
        VerifySettings(**bad)


def test_reads_average_no_more_than_the_bound_over_threads() -> None:
    import threading
    import time

    from airflow_cdc.verify.source_side import RowRate

    rate = RowRate(2_000)
    started = time.monotonic()

    def reads() -> None:
        for _ in range(3):
            with rate.reading(100):
                pass  # a read as fast as the server's

    threads = [threading.Thread(target=reads) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert time.monotonic() - started >= 600 / 2_000  # 600 rows at 2,000 a second
    unbounded = RowRate(0)
    begun = time.monotonic()
    with unbounded.reading(10**9):
        pass
    assert time.monotonic() - begun < 0.1
