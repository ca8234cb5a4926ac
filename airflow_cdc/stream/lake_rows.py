"""A stream's change rows as their lake tables take them: the columns and masks
(``source.masking.LakeRows``), and without the change metadata columns when the stream does
not keep them (``LakeColumnsConfig.change_metadata``), so a stream without them stages,
sends and merges the rows it did before. A lake table that has the columns takes such rows
with them null (``sinks.contract.conform``)."""

from __future__ import annotations

import pyarrow as pa

from airflow_cdc.config import LakeColumnsConfig
from airflow_cdc.model import TableSchema
from airflow_cdc.sinks.contract.cdc_columns import CHANGE_METADATA_FIELDS
from airflow_cdc.source.masking import LakeRows

__all__ = ["StreamLakeRows"]

_METADATA = [f.name for f in CHANGE_METADATA_FIELDS]


class StreamLakeRows:
    """``rows`` of a table (the stream's change layout) as its lake table takes them."""

    def __init__(self, config: LakeColumnsConfig) -> None:
        self._shaped = LakeRows(config)
        self._keep_metadata = config.change_metadata

    def __call__(self, schema: TableSchema, rows: pa.Table) -> pa.Table:
        if not self._keep_metadata:
            rows = rows.drop_columns([n for n in _METADATA if n in rows.column_names])
        return self._shaped(schema, rows)
