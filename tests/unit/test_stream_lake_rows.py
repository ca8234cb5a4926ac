"""StreamLakeRows: a stream's change rows as their lake tables take them, the change
metadata columns kept only when the stream keeps them, the columns and masks applied."""

from __future__ import annotations

import pyarrow as pa

from airflow_cdc.config import LakeColumnsConfig
from airflow_cdc.model import Column, TableId, TableSchema
from airflow_cdc.sinks.contract.cdc_columns import COMMIT_TS_COLUMN, COMMIT_TS_TYPE, OP_COLUMN
from airflow_cdc.stream.lake_rows import StreamLakeRows

SCHEMA = TableSchema(
    TableId("db", "t"),
    (
        Column("id", "int", "int(11)", False),
        Column("email", "varchar", "varchar(50)", True),
        Column("ssn", "char", "char(11)", True),
    ),
    ("id",),
)
ROWS = pa.table(
    {
        "id": pa.array([1, 2], pa.int32()),
        "email": ["a@example.org", None],
        "ssn": ["SSN-1", "SSN-2"],
        "_cdc_position": pa.array([5, 6], pa.decimal128(38, 0)),
        "_cdc_deleted": [False, False],
        OP_COLUMN: ["c", "u"],
        COMMIT_TS_COLUMN: pa.array([1_000_000, 2_000_000], COMMIT_TS_TYPE),
    }
)


def test_without_change_metadata_the_rows_are_the_plain_ones() -> None:
    shaped = StreamLakeRows(LakeColumnsConfig())(SCHEMA, ROWS)
    assert shaped.column_names == ["id", "email", "ssn", "_cdc_position", "_cdc_deleted"]
    assert shaped.equals(ROWS.drop_columns([OP_COLUMN, COMMIT_TS_COLUMN]))


def test_with_change_metadata_the_rows_keep_it_and_the_rules_apply() -> None:
    config = LakeColumnsConfig(
        columns={"db.t": {"exclude": ["ssn"]}}, masks={"db.t.email": "null"}, change_metadata=True
    )
    shaped = StreamLakeRows(config)(SCHEMA, ROWS)
    assert shaped.column_names == [
        "id",
        "email",
        "_cdc_position",
        "_cdc_deleted",
        OP_COLUMN,
        COMMIT_TS_COLUMN,
    ]
    assert shaped.column("email").null_count == 2
    assert shaped.column(OP_COLUMN).to_pylist() == ["c", "u"]
