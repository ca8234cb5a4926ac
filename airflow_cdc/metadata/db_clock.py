"""The metadata DB's clock: the one clock every stream that claims a lease reads.

Leases expire by this clock (``metadata.lease_rule``), not by the clocks of the hosts that
run streams, so a host whose clock runs ahead cannot see a live lease as expired. A server
DB answers with its own time (PostgreSQL's ``clock_timestamp()``, MySQL's and MariaDB's
``UTC_TIMESTAMP(6)``: the time of the statement, not of the transaction's start, which may
have waited for a lock). SQLite has no server: the file's clock is that of the host whose
processes share it (the embedded default runs on one host; several hosts use a server DB).
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy.engine import Connection

from airflow_cdc.connection_ids import METADATA_CONN_ID
from airflow_cdc.errors import MetadataError
from airflow_cdc.metadata import codec

__all__ = ["db_now"]

#: The statement that reads each server dialect's clock, in UTC, as a naive timestamp.
_NOW_SQL = {
    "postgresql": "SELECT CAST(clock_timestamp() AT TIME ZONE 'UTC' AS timestamp)",
    "mysql": "SELECT UTC_TIMESTAMP(6)",
    "mariadb": "SELECT UTC_TIMESTAMP(6)",
}


def db_now(connection: Connection) -> dt.datetime:
    """The metadata DB's current time (aware, UTC), read on ``connection``."""
    dialect = connection.dialect.name
    if dialect == "sqlite":
        return codec.utc_now()
    sql = _NOW_SQL.get(dialect)
    if sql is None:
        raise MetadataError(
            f"the metadata DB (Airflow connection '{METADATA_CONN_ID}') is a {dialect} database, "
            "whose clock airflow-cdc does not know how to read; stream leases expire by the "
            "metadata DB's clock. Fix: use PostgreSQL, MySQL, MariaDB or a SQLite file"
        )
    value = connection.exec_driver_sql(sql).scalar_one()
    if not isinstance(value, dt.datetime):
        raise MetadataError(
            f"the metadata DB ({dialect}, Airflow connection '{METADATA_CONN_ID}') answered "
            f"{sql!r} with {value!r}, not a time. Fix: check the database's driver"
        )
    return codec.as_utc(value)
