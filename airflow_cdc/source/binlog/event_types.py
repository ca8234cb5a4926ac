"""What the reader does with each binlog event type (pure): every type number MySQL 8.4 and
MariaDB 11.x define has an entry, and a number that has none is refused.

A reader that asks its library for some event types and lets the rest pass loses data in
silence the day the server writes a type it did not ask for (a compressed row event is not
a row event to a library that does not know it). So the dump reads every event, and each
is one of:

* ``DECODED``: read by the reader (rows, table maps, commits, DDL, rotations);
* ``UNCOMPRESSED``: MariaDB's ``log_bin_compress`` form of a decoded type, turned back into
  that type before anything reads it (``source.binlog.compressed``);
* ``UNWRAPPED``: MySQL's ``Transaction_payload`` (``binlog_transaction_compression``), whose
  inner events are read in its place (``source.binlog.compressed``);
* ``HARMLESS``: carries nothing a replica of rows needs; :attr:`EventType.why` says why;
* ``REFUSED``: stops the reader, naming the type, its position and the server setting
  behind it (:attr:`EventType.why` ends with the way on).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "EVENT_TYPES",
    "ROWS_AS_STATEMENT",
    "EventType",
    "Handling",
    "event_type",
    "plain_kind",
    "refusal",
]


class Handling(enum.Enum):
    DECODED = "decoded"
    UNCOMPRESSED = "uncompressed"
    UNWRAPPED = "unwrapped"
    HARMLESS = "harmless"
    REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class EventType:
    """One binlog event type: its number, the server's name for it, the name ``SHOW BINLOG
    EVENTS`` gives it (``Event_type``), what the reader does with it and why; ``twin``: for
    a compressed type, the number of the type it compresses."""

    code: int
    name: str
    shown_as: str
    handling: Handling
    why: str
    twin: int | None = None


#: Why a statement that changed rows cannot be applied, and the way on.
ROWS_AS_STATEMENT = (
    "the writer's session logged a statement instead of its rows (binlog_format STATEMENT or "
    "MIXED in that session; the server's global value is checked before the stream starts). "
    "Make every writer use binlog_format=ROW, then snapshot the affected tables again"
)
_OLD_SERVER = (
    "it is written only by servers older than MySQL 5.1 / MariaDB 5.1, whose binlogs the "
    "product does not read. Replicate that server into a current one and follow that"
)
_STATEMENT_CONTEXT = (
    "context of the statement-based query event after it (LAST_INSERT_ID, RAND seeds, user "
    "variables); the reader refuses a data-changing query event itself"
)
_GTID = "a transaction's GTID: positions are file and offset; GTID states are read apart"


d, h, r, u = Handling.DECODED, Handling.HARMLESS, Handling.REFUSED, Handling.UNCOMPRESSED
#: The table itself, in type order.
_ENTRIES = (
    EventType(0, "UNKNOWN_EVENT", "Unknown", r, "the server wrote an event of no known type"),
    EventType(1, "START_EVENT_V3", "Start_v3", r, _OLD_SERVER),
    EventType(2, "QUERY_EVENT", "Query", d, "commits, DDL and statements"),
    EventType(3, "STOP_EVENT", "Stop", h, "the server stopped; the next file follows"),
    EventType(4, "ROTATE_EVENT", "Rotate", d, "the next file"),
    EventType(5, "INTVAR_EVENT", "Intvar", h, _STATEMENT_CONTEXT),
    EventType(6, "LOAD_EVENT", "Load", r, _OLD_SERVER),
    EventType(7, "SLAVE_EVENT", "Slave", r, _OLD_SERVER),
    EventType(8, "CREATE_FILE_EVENT", "Create_file", r, _OLD_SERVER),
    EventType(9, "APPEND_BLOCK_EVENT", "Append_block", r, f"LOAD DATA: {ROWS_AS_STATEMENT}"),
    EventType(10, "EXEC_LOAD_EVENT", "Exec_load", r, _OLD_SERVER),
    EventType(11, "DELETE_FILE_EVENT", "Delete_file", r, f"LOAD DATA: {ROWS_AS_STATEMENT}"),
    EventType(12, "NEW_LOAD_EVENT", "New_load", r, _OLD_SERVER),
    EventType(13, "RAND_EVENT", "RAND", h, _STATEMENT_CONTEXT),
    EventType(14, "USER_VAR_EVENT", "User var", h, _STATEMENT_CONTEXT),
    EventType(15, "FORMAT_DESCRIPTION_EVENT", "Format_desc", d, "the file's event layout"),
    EventType(16, "XID_EVENT", "Xid", d, "a commit"),
    EventType(
        17, "BEGIN_LOAD_QUERY_EVENT", "Begin_load_query", r, f"LOAD DATA: {ROWS_AS_STATEMENT}"
    ),
    EventType(
        18, "EXECUTE_LOAD_QUERY_EVENT", "Execute_load_query", r, f"LOAD DATA: {ROWS_AS_STATEMENT}"
    ),
    EventType(19, "TABLE_MAP_EVENT", "Table_map", d, "the layout of the row events after it"),
    EventType(20, "PRE_GA_WRITE_ROWS_EVENT", "Write_rows_event_old", r, _OLD_SERVER),
    EventType(21, "PRE_GA_UPDATE_ROWS_EVENT", "Update_rows_event_old", r, _OLD_SERVER),
    EventType(22, "PRE_GA_DELETE_ROWS_EVENT", "Delete_rows_event_old", r, _OLD_SERVER),
    EventType(23, "WRITE_ROWS_EVENT_V1", "Write_rows_v1", d, "inserted rows"),
    EventType(24, "UPDATE_ROWS_EVENT_V1", "Update_rows_v1", d, "updated rows"),
    EventType(25, "DELETE_ROWS_EVENT_V1", "Delete_rows_v1", d, "deleted rows"),
    EventType(
        26,
        "INCIDENT_EVENT",
        "Incident",
        r,
        "the server records that changes may be missing from its binlog (an incident, e.g. "
        "a failed binlog write). The replica cannot be known to be complete past it: "
        "snapshot the followed tables again, and restart the stream after the incident",
    ),
    EventType(27, "HEARTBEAT_LOG_EVENT", "Heartbeat", h, "the dump is alive; no data"),
    EventType(28, "IGNORABLE_LOG_EVENT", "Ignorable", h, "marked ignorable by the server"),
    EventType(29, "ROWS_QUERY_LOG_EVENT", "Rows_query", h, "the text of a row statement"),
    EventType(30, "WRITE_ROWS_EVENT", "Write_rows", d, "inserted rows"),
    EventType(31, "UPDATE_ROWS_EVENT", "Update_rows", d, "updated rows"),
    EventType(32, "DELETE_ROWS_EVENT", "Delete_rows", d, "deleted rows"),
    EventType(33, "GTID_LOG_EVENT", "Gtid", h, _GTID),
    EventType(34, "ANONYMOUS_GTID_LOG_EVENT", "Anonymous_Gtid", h, _GTID),
    EventType(35, "PREVIOUS_GTIDS_LOG_EVENT", "Previous_gtids", h, _GTID),
    EventType(
        36,
        "TRANSACTION_CONTEXT_EVENT",
        "Transaction_context",
        h,
        "group replication's certification data; no rows",
    ),
    EventType(37, "VIEW_CHANGE_EVENT", "View_change", h, "group membership; no rows"),
    EventType(38, "XA_PREPARE_LOG_EVENT", "XA_prepare", d, "an XA transaction prepared"),
    EventType(
        39,
        "PARTIAL_UPDATE_ROWS_EVENT",
        "Update_rows_partial",
        d,
        "updated rows whose JSON after-images are diffs (a session set "
        "binlog_row_value_options=PARTIAL_JSON): read, and refused when a followed "
        "table's (source.binlog.mysql_replication names the table and the setting)",
    ),
    EventType(
        40,
        "TRANSACTION_PAYLOAD_EVENT",
        "Transaction_payload",
        Handling.UNWRAPPED,
        "a compressed transaction (binlog_transaction_compression=ON)",
    ),
    EventType(41, "HEARTBEAT_LOG_EVENT_V2", "Heartbeat_v2", h, "the dump is alive; no data"),
    EventType(42, "GTID_TAGGED_LOG_EVENT", "Gtid_tagged_log_event", h, _GTID),
    EventType(160, "ANNOTATE_ROWS_EVENT", "Annotate_rows", h, "the text of a row statement"),
    EventType(161, "BINLOG_CHECKPOINT_EVENT", "Binlog_checkpoint", h, "crash recovery"),
    EventType(162, "GTID_EVENT", "Gtid", h, _GTID),
    EventType(163, "GTID_LIST_EVENT", "Gtid_list", h, _GTID),
    EventType(
        164,
        "START_ENCRYPTION_EVENT",
        "Start_encryption",
        h,
        "the file is encrypted at rest; the server decrypts events before it sends them",
    ),
    EventType(165, "QUERY_COMPRESSED_EVENT", "Query_compressed", u, "log_bin_compress", 2),
    EventType(
        166,
        "WRITE_ROWS_COMPRESSED_EVENT_V1",
        "Write_rows_compressed_v1",
        u,
        "log_bin_compress",
        23,
    ),
    EventType(
        167,
        "UPDATE_ROWS_COMPRESSED_EVENT_V1",
        "Update_rows_compressed_v1",
        u,
        "log_bin_compress",
        24,
    ),
    EventType(
        168,
        "DELETE_ROWS_COMPRESSED_EVENT_V1",
        "Delete_rows_compressed_v1",
        u,
        "log_bin_compress",
        25,
    ),
    EventType(
        169, "WRITE_ROWS_COMPRESSED_EVENT", "Write_rows_compressed", u, "log_bin_compress", 30
    ),
    EventType(
        170, "UPDATE_ROWS_COMPRESSED_EVENT", "Update_rows_compressed", u, "log_bin_compress", 31
    ),
    EventType(
        171, "DELETE_ROWS_COMPRESSED_EVENT", "Delete_rows_compressed", u, "log_bin_compress", 32
    ),
    EventType(
        172,
        "PARTIAL_ROW_DATA_EVENT",
        "Partial_row_data",
        r,
        "a row event split into fragments (MariaDB 12 and later, for a row event larger "
        "than the replica's packet limit), which the reader does not reassemble. Keep row "
        "events below slave_max_allowed_packet (smaller transactions' statements)",
    ),
)
del d, h, r, u


#: Every event type by number.
EVENT_TYPES: Mapping[int, EventType] = MappingProxyType({e.code: e for e in _ENTRIES})
_BY_SHOWN = {e.shown_as: e for e in EVENT_TYPES.values() if e.code not in (33, 34, 35, 42)}


def event_type(code: int) -> EventType:
    """The entry of type number ``code``; a number no server defines is an ``UNKNOWN`` one,
    refused."""
    known = EVENT_TYPES.get(code)
    if known is not None:
        return known
    return EventType(
        code,
        f"event type {code}",
        f"type {code}",
        Handling.REFUSED,
        "no MySQL 8.4 or MariaDB 11 server defines it: a newer server wrote it. Upgrade "
        "airflow-cdc to a release that reads it, or turn off the server feature that writes it",
    )


def plain_kind(shown_as: str) -> str:
    """The ``SHOW BINLOG EVENTS`` type of the event a compressed one stands for
    (``Query_compressed`` -> ``Query``); others as they are."""
    entry = _BY_SHOWN.get(shown_as)
    if entry is None or entry.twin is None:
        return shown_as
    return EVENT_TYPES[entry.twin].shown_as


def refusal(entry: EventType, where: str) -> str:
    """The message that stops a reader at a refused event ending at ``where``."""
    return (
        f"the binlog event ending at {where} is a {entry.name} (type {entry.code}), which "
        f"airflow-cdc does not apply: {entry.why}. Nothing from this event on was applied"
    )
