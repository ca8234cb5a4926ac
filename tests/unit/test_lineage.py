"""airflow_cdc.lineage: datasets named as OpenLineage's naming spec says.

The expectations are written from the spec's own examples (MySQL: ``mysql://{host}:{port}``
and ``{database}.{table}``; a local file: namespace ``file``, its absolute path; S3:
``s3://{bucket}`` and the object's path), not from the module's code; the Delta table's
folder is rebuilt from the escaping rule of ``sinks.contract.naming`` read back with
``unescape_segment``.
"""

from __future__ import annotations

import os
from urllib.parse import quote

from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.lineage import (
    DatasetField,
    LineageDataset,
    lake_dataset,
    location_name,
    mysql_namespace,
    source_dataset,
    task_lineage,
)
from airflow_cdc.model import Column, TableId, TableSchema
from airflow_cdc.sinks.contract.naming import unescape_segment

names = st.text(min_size=1, max_size=12).filter(lambda s: "\x00" not in s)
tables = st.builds(TableId, names, names)
hosts = st.from_regex(r"[a-z][a-z0-9-]{0,10}(\.[a-z][a-z0-9-]{0,10}){0,2}", fullmatch=True)
ports = st.integers(1, 65535)
buckets = st.from_regex(r"[a-z0-9][a-z0-9-]{2,20}", fullmatch=True)
folders = st.lists(st.from_regex(r"[A-Za-z0-9_-]{1,8}", fullmatch=True), max_size=3)

ORDERS = TableSchema(
    TableId("shop", "orders"),
    (
        Column("id", "bigint", "bigint(20)", False),
        Column("amount", "decimal", "decimal(12,2)", True, precision=12, scale=2),
    ),
    ("id",),
)


@given(host=hosts, port=ports, table=tables)
def test_a_source_table_is_named_as_the_spec_names_mysql(
    host: str, port: int, table: TableId
) -> None:
    dataset = source_dataset(host, port, table)
    assert dataset.namespace == "mysql://" + host + ":" + str(port)
    assert dataset.name == table.database + "." + table.table
    assert dataset.fields == ()


def test_an_ipv6_source_is_bracketed() -> None:
    assert mysql_namespace("::1", 3306) == "mysql://[::1]:3306"
    assert mysql_namespace("[::1]", 3306) == "mysql://[::1]:3306"


@given(root=folders.map(lambda parts: "/" + "/".join(["lake", *parts])), table=tables)
def test_a_local_delta_table_is_its_absolute_folder(root: str, table: TableId) -> None:
    for given_root in (root, root + "/", "file://" + root):
        dataset = lake_dataset(given_root, table)
        assert dataset.namespace == "file"
        head, db_segment, table_segment = dataset.name.rsplit("/", 2)
        assert head == root
        assert (unescape_segment(db_segment), unescape_segment(table_segment)) == (
            table.database,
            table.table,
        )


@given(bucket=buckets, parts=folders, table=tables, scheme=st.sampled_from(["s3", "s3a"]))
def test_an_s3_delta_table_is_its_bucket_and_key(
    bucket: str, parts: list[str], table: TableId, scheme: str
) -> None:
    root = f"{scheme}://{bucket}/" + "/".join(parts)
    dataset = lake_dataset(root, table)
    assert dataset.namespace == "s3://" + bucket
    key = dataset.name.split("/")
    assert not dataset.name.startswith("/")
    assert key[:-2] == parts
    assert [unescape_segment(s) for s in key[-2:]] == [table.database, table.table]


@given(
    user=st.text(min_size=1, max_size=8), password=st.text(min_size=1, max_size=8), bucket=buckets
)
def test_no_credential_of_a_uri_reaches_a_name(user: str, password: str, bucket: str) -> None:
    userinfo = quote(user, safe="") + ":" + quote(password, safe="")
    namespace, name = location_name(f"s3://{userinfo}@{bucket}/lake/shop/orders")
    assert (namespace, name) == ("s3://" + bucket, "lake/shop/orders")


def test_object_stores_as_the_spec_names_them() -> None:
    assert location_name("gs://b/lake/db/t") == ("gs://b", "lake/db/t")
    assert location_name("gcs://b/lake/db/t") == ("gs://b", "lake/db/t")
    assert location_name("abfss://box@acct.dfs.core.windows.net/lake/db/t") == (
        "abfss://box@acct.dfs.core.windows.net",
        "lake/db/t",
    )
    assert location_name("s3://b:9000/x") == ("s3://b:9000", "x")


def test_a_relative_folder_is_taken_from_where_the_task_runs() -> None:
    assert location_name("lake/db/t") == ("file", os.path.join(os.getcwd(), "lake/db/t"))


def test_schemas_give_the_source_types_in_and_the_stored_types_out() -> None:
    lineage = task_lineage("db.example", 3306, "/lake", [ORDERS])
    (read,) = lineage.inputs
    (written,) = lineage.outputs
    assert read == LineageDataset(
        "mysql://db.example:3306",
        "shop.orders",
        (DatasetField("id", "bigint(20)"), DatasetField("amount", "decimal(12,2)")),
    )
    assert written == LineageDataset(
        "file",
        "/lake/shop/orders",
        (DatasetField("id", "int64"), DatasetField("amount", "decimal128(12, 2)")),
    )


@given(picked=st.lists(tables, max_size=6))
def test_each_table_once_in_the_order_given(picked: list[TableId]) -> None:
    lineage = task_lineage("h", 1, "/lake", picked)
    unique = list(dict.fromkeys(picked))
    assert [d.name for d in lineage.inputs] == [f"{t.database}.{t.table}" for t in unique]
    assert len(lineage.outputs) == len(unique)
