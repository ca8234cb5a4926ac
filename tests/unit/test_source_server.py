"""Server flavour/version parsing and the binlog status statement per version (no server)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_cdc.errors import BinlogSettingsError, SourceSwitchedError
from airflow_cdc.model import BinlogPosition, ServerEpoch
from airflow_cdc.source.server import ServerInfo, current_position, parse_version


@pytest.mark.parametrize(
    ("text", "flavour", "version"),
    [
        ("10.11.19-MariaDB-0+deb12u1-log", "mariadb", (10, 11, 19)),
        ("5.5.5-10.6.12-MariaDB", "mariadb", (10, 6, 12)),
        ("11.4.2-MariaDB", "mariadb", (11, 4, 2)),
        ("8.4.2", "mysql", (8, 4, 2)),
        ("8.0.36-0ubuntu0.22.04.1", "mysql", (8, 0, 36)),
        ("5.7.44-log", "mysql", (5, 7, 44)),
        ("8.0.35-27", "mysql", (8, 0, 35)),  # Percona Server
    ],
)
def test_parse_version(text: str, flavour: str, version: tuple[int, int, int]) -> None:
    info = parse_version(text)
    assert (info.flavour, info.version) == (flavour, version)


def test_parse_version_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="cannot parse"):
        parse_version("not a version")


@pytest.mark.parametrize(
    ("flavour", "version", "sql"),
    [
        ("mariadb", (10, 3, 39), "SHOW MASTER STATUS"),
        ("mariadb", (10, 5, 1), "SHOW MASTER STATUS"),
        ("mariadb", (10, 5, 2), "SHOW BINLOG STATUS"),
        ("mariadb", (10, 11, 19), "SHOW BINLOG STATUS"),
        ("mariadb", (11, 4, 0), "SHOW BINLOG STATUS"),
        ("mysql", (5, 7, 44), "SHOW MASTER STATUS"),
        ("mysql", (8, 0, 36), "SHOW MASTER STATUS"),
        ("mysql", (8, 1, 0), "SHOW MASTER STATUS"),
        ("mysql", (8, 2, 0), "SHOW BINARY LOG STATUS"),
        ("mysql", (8, 4, 2), "SHOW BINARY LOG STATUS"),
        ("mysql", (9, 1, 0), "SHOW BINARY LOG STATUS"),
    ],
)
def test_binlog_status_sql(flavour: str, version: tuple[int, int, int], sql: str) -> None:
    assert ServerInfo(flavour, version).binlog_status_sql == sql  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        (ServerInfo("mariadb", (10, 4, 30)), False),
        (ServerInfo("mariadb", (10, 5, 0)), True),
        (ServerInfo("mysql", (8, 0, 0)), False),
        (ServerInfo("mysql", (8, 0, 1)), True),
    ],
)
def test_row_metadata_exists_from(info: ServerInfo, expected: bool) -> None:
    assert info.has_binlog_row_metadata is expected


def test_monitor_grant_name() -> None:
    assert ServerInfo("mariadb", (10, 11, 0)).binlog_monitor_grant == "BINLOG MONITOR"
    assert ServerInfo("mariadb", (10, 4, 0)).binlog_monitor_grant == "REPLICATION CLIENT"
    assert ServerInfo("mysql", (8, 4, 0)).binlog_monitor_grant == "REPLICATION CLIENT"


class _OneRow:
    """A connection whose every query returns ``row``."""

    def __init__(self, row: tuple[Any, ...] | None) -> None:
        self.row = row
        self.sql: list[str] = []

    def cursor(self) -> _OneRow:
        return self

    def __enter__(self) -> _OneRow:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def execute(self, sql: str, args: Any = None) -> int:
        self.sql.append(sql)
        return 1

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.row

    def commit(self) -> None: ...

    def rollback(self) -> None: ...


def test_current_position_reads_file_and_offset() -> None:
    conn = _OneRow(("mysql-bin.000007", 4242, "", ""))
    position = current_position(conn, ServerInfo("mysql", (8, 4, 2), 7, epoch=2))
    assert position == BinlogPosition("mysql-bin.000007", 4242, 0, epoch=2)
    assert conn.sql == ["SHOW BINARY LOG STATUS"]


def test_a_position_needs_the_servers_epoch_and_the_same_server() -> None:
    """A position read without knowing which server it is would be ordered wrongly."""
    with pytest.raises(RuntimeError, match="epoch"):
        current_position(_OneRow(("mysql-bin.000007", 4242)), ServerInfo("mysql", (8, 4, 2)))
    info = ServerInfo("mariadb", (10, 11, 19), server_id=2)
    assert info.in_epoch(ServerEpoch(2, 1)).epoch == 1
    with pytest.raises(SourceSwitchedError, match=r"server_id 2, not server_id 1 \(epoch 0\)"):
        info.in_epoch(ServerEpoch(1, 0))


def test_current_position_binlog_off() -> None:
    with pytest.raises(BinlogSettingsError, match="log_bin"):
        current_position(_OneRow(None), ServerInfo("mariadb", (10, 11, 19)))
