"""The ``start_position`` a user gives to start a stream from a place in the binlog instead
of a snapshot (Flink CDC's ``specific-offset`` startup mode): a binlog file and byte offset,
or a MariaDB GTID position. Read here, before any server is asked; where it lies on the
server is ``source.binlog.start_search``'s."""

from __future__ import annotations

import re

from airflow_cdc.errors import ConfigurationError
from airflow_cdc.model import BinlogPosition
from airflow_cdc.model.gtid import MariaGtidPos

__all__ = ["START_POSITION_FORMS", "parse_start_position"]

#: What ``start_position`` accepts, for the messages that refuse it.
START_POSITION_FORMS = (
    "a binlog file and byte offset ('mysql-bin.000003:1234', as SHOW BINARY LOGS and "
    "SHOW MASTER STATUS give them) or a MariaDB GTID position ('0-1-100'; one GTID per "
    "replication domain, comma-separated: '0-1-100,1-2-7')"
)

#: The first event of a binlog file starts after its 4-byte magic number.
_FIRST_EVENT = 4
_FILE_OFFSET = re.compile(r"(?P<file>[\w.-]+\.\d+):(?P<offset>\d+)")
#: Numbers as the server writes them, without leading zeros (``2024-05-01`` is a date).
_GTID = r"(?:0|[1-9]\d*)-(?:0|[1-9]\d*)-(?:0|[1-9]\d*)"
_GTIDS = re.compile(rf"{_GTID}(?:\s*,\s*{_GTID})*")


def parse_start_position(text: str) -> BinlogPosition | str:
    """``mysql-bin.000003:1234`` as a :class:`BinlogPosition` (epoch 0: the epoch is the
    server's, told when the stream starts); ``0-1-100[,1-2-7...]`` as the GTID position's
    text (one GTID per domain, by domain). Anything else: :class:`ConfigurationError`."""
    stripped = text.strip()
    position = _FILE_OFFSET.fullmatch(stripped)
    if position is not None:
        return _file_offset(stripped, position["file"], int(position["offset"]))
    if _GTIDS.fullmatch(stripped):
        try:
            return str(MariaGtidPos.parse(stripped))
        except ValueError as exc:
            raise _refused(text, str(exc)) from exc
    raise _refused(text, "neither form")


def _file_offset(text: str, file: str, offset: int) -> BinlogPosition:
    if offset < _FIRST_EVENT:
        raise _refused(text, f"a file's first event starts at offset {_FIRST_EVENT}")
    try:
        return BinlogPosition(file, offset)
    except ValueError as exc:
        raise _refused(text, str(exc)) from exc


def _refused(text: str, why: str) -> ConfigurationError:
    return ConfigurationError(
        f"start_position {text!r} is not a start position ({why}): give {START_POSITION_FORMS}; "
        "a time goes in start_timestamp"
    )
