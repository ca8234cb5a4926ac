"""Small frozen value types shared by every layer. No I/O here."""

from airflow_cdc.model.chunk import Chunk, ChunkRange
from airflow_cdc.model.event import ChangeEvent, ChangeKind, Row
from airflow_cdc.model.keys import (
    Key,
    KeyScalar,
    comparable_key,
    decode_key,
    encode_key,
    format_key,
    naive_utc,
)
from airflow_cdc.model.partitioning import Partition, Partitioning, RowFilter, ValueRange
from airflow_cdc.model.plan import SplitMethod, TablePlan
from airflow_cdc.model.position import ROW_NUMBERS, BinlogPosition, binlog_file_number
from airflow_cdc.model.schema_change import DdlKind, SchemaChange, SchemaEvent
from airflow_cdc.model.selection import LeftOut, TablePattern, TableSelection
from airflow_cdc.model.server_epoch import ServerEpoch
from airflow_cdc.model.table import (
    Column,
    SystemVersioning,
    TableId,
    TableOptions,
    TableSchema,
    describe_tables,
    quote_identifier,
)

__all__ = [
    "ROW_NUMBERS",
    "BinlogPosition",
    "ChangeEvent",
    "ChangeKind",
    "Chunk",
    "ChunkRange",
    "Column",
    "DdlKind",
    "Key",
    "KeyScalar",
    "LeftOut",
    "Partition",
    "Partitioning",
    "Row",
    "RowFilter",
    "SchemaChange",
    "SchemaEvent",
    "ServerEpoch",
    "SplitMethod",
    "SystemVersioning",
    "TableId",
    "TableOptions",
    "TablePattern",
    "TablePlan",
    "TableSchema",
    "TableSelection",
    "ValueRange",
    "binlog_file_number",
    "comparable_key",
    "decode_key",
    "describe_tables",
    "encode_key",
    "format_key",
    "naive_utc",
    "quote_identifier",
]
