"""Is the source ready for CDC? Checked before anything is planned or read.

Each problem names the setting or the GRANT statement that fixes it. All problems are
collected and reported in one error, so a user fixes them in one round trip; the error's
class is that of the most basic problem (binlog settings, then privileges, then tables).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import pymysql

from airflow_cdc.errors import BinlogSettingsError, PrivilegeError, SourceError, TableError
from airflow_cdc.model import TableId, quote_identifier
from airflow_cdc.source.catalog.followable import left_out_reason
from airflow_cdc.source.catalog.listing import table_facts
from airflow_cdc.source.connection import DbConnection, fetch_all, fetch_one
from airflow_cdc.source.grants import Grants
from airflow_cdc.source.server import ServerInfo

__all__ = ["SourceProblem", "find_source_problems", "validate_source"]

ProblemKind = Literal["binlog", "privilege", "table"]

_ERROR_CLASSES: dict[ProblemKind, type[SourceError]] = {
    "binlog": BinlogSettingsError,
    "privilege": PrivilegeError,
    "table": TableError,
}

_VARIABLES = (
    "log_bin",
    "binlog_format",
    "binlog_row_image",
    "binlog_row_metadata",
    "binlog_row_value_options",
    "binlog_order_commits",
    "lower_case_table_names",
)


@dataclass(frozen=True, slots=True)
class SourceProblem:
    """One thing to fix on the source, with the fix in the message."""

    kind: ProblemKind
    message: str


def validate_source(conn: DbConnection, info: ServerInfo, tables: Sequence[TableId]) -> None:
    """Raise BinlogSettingsError / PrivilegeError / TableError listing every problem found."""
    problems = find_source_problems(conn, info, tables)
    if not problems:
        return
    first = min(problems, key=lambda p: list(_ERROR_CLASSES).index(p.kind)).kind
    if len(problems) == 1:
        raise _ERROR_CLASSES[first](problems[0].message)
    lines = "\n".join(f"- {p.message}" for p in problems)
    raise _ERROR_CLASSES[first](f"the source ({info}) is not ready for CDC:\n{lines}")


def find_source_problems(
    conn: DbConnection, info: ServerInfo, tables: Sequence[TableId]
) -> list[SourceProblem]:
    """Every problem found, in the order binlog settings, privileges, tables."""
    names = ", ".join(["%s"] * len(_VARIABLES))
    variables = {
        str(name).lower(): str(value)
        for name, value in fetch_all(
            conn, f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({names})", _VARIABLES
        )
    }
    problems = _binlog_problems(info, variables)
    if not info.is_mariadb:
        problems += _session_problems(conn)
    user = _current_user(conn)
    grants = Grants.parse(
        (str(row[0]) for row in fetch_all(conn, "SHOW GRANTS")),
        case_sensitive=variables.get("lower_case_table_names", "0") == "0",
    )
    problems += _privilege_problems(info, grants, user, tables)
    # A table the user may not read is invisible in information_schema: it is reported once,
    # as the missing grant, not also as missing.
    problems += _table_problems(conn, [t for t in tables if grants.can_select(t)], user)
    return problems


def _binlog_problems(info: ServerInfo, variables: dict[str, str]) -> list[SourceProblem]:
    def fix(name: str, value: str, why: str = "") -> SourceProblem:
        current = variables.get(name, "unset") or "empty"
        return SourceProblem(
            "binlog",
            f"{name} is {current}{why}; set {name}={value} in the server config "
            f"([mysqld] {name}={value}) and restart",
        )

    if variables.get("log_bin", "OFF").upper() not in {"ON", "1"}:
        return [
            SourceProblem(
                "binlog",
                "binary logging is off (log_bin is OFF); enable it in the server config "
                "([mysqld] log_bin=mysql-bin, server_id=<unique number>, binlog_format=ROW, "
                "binlog_row_image=FULL) and restart",
            )
        ]
    problems: list[SourceProblem] = []
    if variables.get("binlog_format", "").upper() != "ROW":
        problems.append(fix("binlog_format", "ROW", " (CDC reads row events)"))
    if variables.get("binlog_row_image", "").upper() != "FULL":
        problems.append(fix("binlog_row_image", "FULL", " (CDC needs whole rows)"))
    metadata = variables.get("binlog_row_metadata")
    if info.has_binlog_row_metadata and metadata is not None and metadata.upper() != "FULL":
        problems.append(fix("binlog_row_metadata", "FULL", " (row events need column names)"))
    options = variables.get("binlog_row_value_options", "")
    if "PARTIAL_JSON" in options.upper():
        problems.append(
            SourceProblem(
                "binlog",
                f"binlog_row_value_options is {options}: partial JSON updates cannot be "
                "applied to a copy; set binlog_row_value_options='' in the server config "
                '([mysqld] binlog_row_value_options="") and restart',
            )
        )
    if not info.is_mariadb and variables.get("binlog_order_commits", "ON").upper() not in {
        "ON",
        "1",
    }:
        problems.append(
            fix("binlog_order_commits", "ON", " (the snapshot low watermark relies on it)")
        )
    return problems


#: Per-session values a writer may set that the binlog must not have, and what they must be:
#: MySQL shows other sessions' values in ``performance_schema.variables_by_thread``.
_SESSION_VALUES = {
    "binlog_format": "ROW",
    "binlog_row_image": "FULL",
    "binlog_row_value_options": "",
}


def _session_problems(conn: DbConnection) -> list[SourceProblem]:
    """MySQL sessions (connected now) whose binlog settings make row events the stream
    refuses when they change a followed table. MariaDB shows no other session's values, and
    a user without access to ``performance_schema`` sees none either: the reader still
    refuses such events at the first one (``source.binlog.event_types``)."""
    marks = ", ".join(["%s"] * len(_SESSION_VALUES))
    try:
        rows = fetch_all(
            conn,
            "SELECT t.PROCESSLIST_USER, t.PROCESSLIST_HOST, t.PROCESSLIST_ID, "  # noqa: S608 - only %s placeholders
            "v.VARIABLE_NAME, v.VARIABLE_VALUE FROM performance_schema.variables_by_thread v "
            "JOIN performance_schema.threads t ON t.THREAD_ID = v.THREAD_ID "
            f"WHERE v.VARIABLE_NAME IN ({marks}) AND t.PROCESSLIST_ID IS NOT NULL",
            list(_SESSION_VALUES),
        )
    except pymysql.err.MySQLError:  # no performance_schema, or no access to it: not shown
        return []
    return [
        SourceProblem(
            "binlog",
            f"the session {id_} of {user}@{host} has {name}={value or 'empty'}: its changes "
            f"reach the binlog in a form the stream refuses; set {name}="
            f"{_SESSION_VALUES[str(name).lower()] or chr(39) * 2} in that client (and do not "
            "let writers change it per session)",
        )
        for user, host, id_, name, value in rows
        if _offends(str(name).lower(), str(value or ""))
    ]


def _offends(name: str, value: str) -> bool:
    if name == "binlog_row_value_options":
        return "PARTIAL_JSON" in value.upper()
    return value.upper() != _SESSION_VALUES[name]


def _current_user(conn: DbConnection) -> str:
    """``'user'@'host'`` of the account the server authenticated us as."""
    row = fetch_one(conn, "SELECT CURRENT_USER()")
    text = str(row[0]) if row else "cdc@%"
    name, _, host = text.rpartition("@")
    return f"'{name}'@'{host}'"


def _privilege_problems(
    info: ServerInfo, grants: Grants, user: str, tables: Sequence[TableId]
) -> list[SourceProblem]:
    problems: list[SourceProblem] = []
    if not grants.has_global("REPLICATION SLAVE"):
        problems.append(
            SourceProblem(
                "privilege",
                "missing privilege REPLICATION SLAVE (to read the binlog): "
                f"GRANT REPLICATION SLAVE ON *.* TO {user}",
            )
        )
    monitor = (
        ("BINLOG MONITOR", "REPLICATION CLIENT", "SUPER")
        if info.is_mariadb
        else ("REPLICATION CLIENT", "SUPER")
    )
    if not grants.has_global(*monitor):
        problems.append(
            SourceProblem(
                "privilege",
                f"missing privilege {info.binlog_monitor_grant} (for {info.binlog_status_sql}): "
                f"GRANT {info.binlog_monitor_grant} ON *.* TO {user}",
            )
        )
    for table in tables:
        if not grants.can_select(table):
            problems.append(
                SourceProblem(
                    "privilege",
                    f"missing SELECT on {table}: GRANT SELECT ON {table.quoted()} TO {user} "
                    f"(or GRANT SELECT ON {quote_identifier(table.database)}.* TO {user})",
                )
            )
    return problems


def _table_problems(
    conn: DbConnection, tables: Sequence[TableId], user: str
) -> list[SourceProblem]:
    if not tables:
        return []
    found = table_facts(conn, sorted({t.database for t in tables}))
    databases_seen = [str(row[0]) for row in fetch_all(conn, "SHOW DATABASES")]
    missing: list[str] = []
    problems: list[SourceProblem] = []
    for table in tables:
        facts = found.get(table)
        if facts is None:
            if table.database in databases_seen:
                candidates = [t.table for t in found if t.database == table.database]
                close = [f"{table.database}.{c}" for c in _close_matches(table.table, candidates)]
            else:
                close = [
                    f"{db}.{table.table}" for db in _close_matches(table.database, databases_seen)
                ]
            missing.append(str(table) + (f" (did you mean {', '.join(close)}?)" if close else ""))
        elif (reason := left_out_reason(facts)) is not None:
            problems.append(SourceProblem("table", f"{table} cannot be followed: {reason}"))
    if missing:
        problems.insert(
            0,
            SourceProblem(
                "table",
                f"table(s) not found on the source: {'; '.join(missing)}. Check the names in "
                f"the DAG's tables setting, and that {user} has a privilege on them",
            ),
        )
    return problems


def _close_matches(name: str, candidates: Sequence[str]) -> list[str]:
    """Close names, comparing case-insensitively (``Orders`` finds ``orders``)."""
    by_fold = {c.casefold(): c for c in candidates}
    hits = difflib.get_close_matches(name.casefold(), list(by_fold), n=3, cutoff=0.6)
    return [by_fold[h] for h in hits]
