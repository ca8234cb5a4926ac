"""What a task reads and writes, for lineage: the source's tables and their Delta tables,
named as OpenLineage's dataset naming spec says (pure; no OpenLineage import: the
operators' adapter, ``operators._lineage``, turns these values into OpenLineage's).

* A MySQL/MariaDB table: namespace ``mysql://{host}:{port}``, name ``{database}.{table}``
  (the spec has no MariaDB entry: a MariaDB server speaks MySQL's protocol and is named so).
* A Delta table, by its location (``sinks.contract.naming.table_path``): a local folder is namespace
  ``file`` with its absolute path as the name; an object store is ``{scheme}://{bucket}``
  with the path inside the bucket, no leading ``/``, as the name (``s3a``/``s3n`` are
  ``s3``, ``gcs`` is ``gs``); an Azure URI keeps its ``container@account`` authority.

No credential reaches a name: a URI's ``user:password@`` is dropped (only an Azure
container, which is no secret, stays), and the source is named by host and port only.
Schema fields: the source table's columns with their MySQL types on the input, and on the
output the same columns with the Arrow type each is stored as in Delta
(``source.arrow_types``); the sink's bookkeeping columns (``_cdc_position``...) are not
listed.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from airflow_cdc.model import TableId, TableSchema
from airflow_cdc.sinks.contract.naming import table_path

__all__ = [
    "DatasetField",
    "LineageDataset",
    "TaskLineage",
    "lake_dataset",
    "location_name",
    "mysql_namespace",
    "source_dataset",
    "task_lineage",
]

#: Schemes written as another in OpenLineage names (as its Spark integration does).
_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "gcs": "gs"}
#: Schemes whose URI user part is a container, not a credential.
_CONTAINER_SCHEMES = frozenset({"abfs", "abfss", "wasb", "wasbs"})


@dataclass(frozen=True, slots=True)
class DatasetField:
    """A column of a dataset's schema: its name and type as the dataset holds it."""

    name: str
    type: str


@dataclass(frozen=True, slots=True)
class LineageDataset:
    """A dataset as OpenLineage names it, with its schema's fields (none when unknown)."""

    namespace: str
    name: str
    fields: tuple[DatasetField, ...] = ()


@dataclass(frozen=True, slots=True)
class TaskLineage:
    """What a task read (the source's tables) and wrote (their Delta tables)."""

    inputs: tuple[LineageDataset, ...] = ()
    outputs: tuple[LineageDataset, ...] = ()


def mysql_namespace(host: str, port: int) -> str:
    """``mysql://{host}:{port}``; an IPv6 address in brackets, as in any URI."""
    host = host.strip()
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"mysql://{host}:{port}"


def location_name(uri: str) -> tuple[str, str]:
    """The namespace and name of a file or folder of the lake (a local path or a URI)."""
    if "://" not in uri or uri.startswith("file://"):
        # Relative paths are relative to where the task runs, as the sink opens them.
        return "file", os.path.abspath(uri.removeprefix("file://"))
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    scheme = _SCHEME_ALIASES.get(scheme, scheme)
    authority = parts.hostname or ""
    if parts.port is not None:
        authority = f"{authority}:{parts.port}"
    if scheme in _CONTAINER_SCHEMES and parts.username and parts.password is None:
        authority = f"{parts.username}@{authority}"
    name = posixpath.normpath(parts.path).lstrip("/") if parts.path.strip("/") else "/"
    return f"{scheme}://{authority}", name


def source_dataset(host: str, port: int, table: TableId | TableSchema) -> LineageDataset:
    """A source table; with its schema, its columns and their MySQL types."""
    schema = table if isinstance(table, TableSchema) else None
    table_id = table.table if isinstance(table, TableSchema) else table
    fields = (
        () if schema is None else tuple(DatasetField(c.name, c.column_type) for c in schema.columns)
    )
    return LineageDataset(
        mysql_namespace(host, port), f"{table_id.database}.{table_id.table}", fields
    )


def lake_dataset(sink_root: str, table: TableId | TableSchema) -> LineageDataset:
    """A source table's Delta table under ``sink_root``; with the source's schema, the
    replicated columns and the Arrow type each is stored as."""
    table_id = table.table if isinstance(table, TableSchema) else table
    namespace, name = location_name(table_path(sink_root, table_id))
    fields: tuple[DatasetField, ...] = ()
    if isinstance(table, TableSchema):
        # Imported here: pyarrow is needed only once a schema is known.
        from airflow_cdc.source.arrow_types import arrow_type

        fields = tuple(DatasetField(c.name, str(arrow_type(c))) for c in table.columns)
    return LineageDataset(namespace, name, fields)


def task_lineage(
    host: str,
    port: int,
    sink_root: str,
    tables: Sequence[TableId | TableSchema],
    lake_schema: Callable[[TableSchema], TableSchema] | None = None,
    lake_table: Callable[[TableId], TableId] = lambda table: table,
) -> TaskLineage:
    """A task over ``tables`` of the source at ``host:port`` and their Delta tables under
    ``sink_root``: each table once, in the order given; ``lake_schema``: a source table's
    schema as its Delta table holds it (the columns left out are not there); ``lake_table``:
    the Delta table a source table's rows go to (routes: one for several)."""
    unique = list({_id(t): t for t in tables}.values())
    stored = [lake_schema(t) if lake_schema and isinstance(t, TableSchema) else t for t in unique]
    routed = [
        replace(t, table=lake_table(t.table)) if isinstance(t, TableSchema) else lake_table(t)
        for t in stored
    ]
    return TaskLineage(
        inputs=tuple(source_dataset(host, port, t) for t in unique),
        outputs=tuple(lake_dataset(sink_root, t) for t in {_id(t): t for t in routed}.values()),
    )


def _id(table: TableId | TableSchema) -> TableId:
    return table.table if isinstance(table, TableSchema) else table
