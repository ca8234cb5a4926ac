"""model.lake_record: what a lake table records of the rules its rows were written under,
and how a writer's rules differ from it (only on columns both name; the key only where
both hash a column)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.model.lake_columns import Mask, MaskKey, MaskKind, TableLakeColumns
from airflow_cdc.model.lake_record import AS_IT_IS, LEFT_OUT, LakeRecord, key_check

NAMES = ["id", "email", "ssn", "notes", "age"]
DECISIONS = [AS_IT_IS, LEFT_OUT, "hash", "null", "truncate:10", "truncate:4"]
records = st.builds(
    LakeRecord,
    st.dictionaries(st.sampled_from(NAMES), st.sampled_from(DECISIONS)),
    st.sampled_from(["", "0123456789abcdef", "fedcba9876543210"]),
)


@given(records)
def test_a_record_reads_back_and_does_not_differ_from_itself(record: LakeRecord) -> None:
    back = LakeRecord.from_text(record.to_text())
    assert back == record
    assert record.differences(back) == []


@given(records, records)
def test_differences_name_exactly_the_columns_both_treat_otherwise(
    written: LakeRecord, given_: LakeRecord
) -> None:
    found = written.differences(given_)
    named = {message.split(":")[0] for message in found if "another mask key" not in message}
    both = set(written.columns) & set(given_.columns)
    assert named == {n for n in both if written.columns[n] != given_.columns[n]}
    key_message = [m for m in found if "another mask key" in m]
    hashed_by_both = {n for n in both if written.columns[n] == given_.columns[n] == "hash"}
    assert bool(key_message) == bool(hashed_by_both and written.key_check != given_.key_check)
    assert bool(found) == bool(given_.differences(written))  # either way round


def test_a_record_of_a_table_s_rules() -> None:
    lake = TableLakeColumns(
        kept=("id", "email", "notes", "age"),
        left_out=("ssn",),
        masks=(("email", Mask(MaskKind.HASH)), ("notes", Mask(MaskKind.TRUNCATE, 10))),
    )
    key = MaskKey(b"the key")
    record = LakeRecord.of(lake, key)
    assert record.columns == {
        "id": AS_IT_IS,
        "email": "hash",
        "notes": "truncate:10",
        "age": AS_IT_IS,
        "ssn": LEFT_OUT,
    }
    assert record.key_check == key_check(key)
    assert LakeRecord.of(TableLakeColumns(("id", "email")), key).key_check == ""  # no hash


@given(st.binary(min_size=8, max_size=40), st.binary(min_size=8, max_size=40))
def test_a_key_check_tells_keys_apart_and_shows_nothing_of_them(one: bytes, two: bytes) -> None:
    first, second = key_check(MaskKey(one)), key_check(MaskKey(two))
    assert (first == second) == (one == two)
    assert len(first) == 16
    assert one.hex() not in first


@pytest.mark.parametrize("text", ["", "[]", '{"columns": [1]}', '{"columns": {"a": 1}, "key": ""}'])
def test_anything_but_a_record_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a record"):
        LakeRecord.from_text(text)
