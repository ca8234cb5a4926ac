"""Run the Alembic migrations from code, safely from several processes at once.

Every chunk job connects with ``migrate=True``, so on a fresh DB many processes try the
first migration together. Each one first reads the version without a lock (the usual case,
already at head, costs one query and does not even import Alembic), then takes the write
lock (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: a transaction-level advisory lock), reads the
version again and only then upgrades, all in one transaction. The losers of the race find
the schema at head and stop.

New revision (developers): add it under ``migrations/versions``, move :data:`HEAD_REVISION`
to it (a unit test checks they agree). To draft one from ``schema.py``:
``.venv/bin/python -c "from airflow_cdc.metadata.migrate import make_revision;
make_revision('sqlite:////tmp/x.db', 'what changed')"``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from airflow_cdc.connection_ids import METADATA_CONN_ID
from airflow_cdc.errors import MetadataError
from airflow_cdc.metadata.engine import create_metadata_engine, with_retry

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = [
    "HEAD_REVISION",
    "MIGRATIONS_DIR",
    "alembic_config",
    "current_revision",
    "head_revision",
    "make_revision",
    "open_engine",
    "upgrade",
]

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
#: The newest revision under ``migrations/versions``; kept here so the common "already at
#: head" check needs no Alembic import (about 0.7 s per chunk-job process).
HEAD_REVISION = "0012"
_VERSION_TABLE = "alembic_version"
#: Arbitrary constant key of the PostgreSQL advisory lock serializing migrations.
_PG_LOCK_KEY = 0x0CDC_3E7A


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config pointing at the package's migrations (no ``alembic.ini`` needed)."""
    from alembic.config import Config  # lazy: see HEAD_REVISION

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The head revision as Alembic computes it from the revision files."""
    from alembic.script import ScriptDirectory  # lazy: see HEAD_REVISION

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:  # pragma: no cover - the package ships revisions
        raise MetadataError("airflow-cdc ships no metadata migrations: the install is broken")
    return str(head)


def _read_revision(connection: Connection) -> str | None:
    if not sa.inspect(connection).has_table(_VERSION_TABLE):
        return None
    revisions = (
        connection.execute(
            sa.text(f"SELECT version_num FROM {_VERSION_TABLE}")  # noqa: S608 (constant name)
        )
        .scalars()
        .all()
    )
    if len(revisions) > 1:
        raise MetadataError(
            f"the metadata DB (Airflow connection '{METADATA_CONN_ID}') has several schema heads "
            f"{sorted(revisions)}: it was migrated by a branched development version"
        )
    return str(revisions[0]) if revisions else None


def current_revision(engine: Engine) -> str | None:
    """The revision the DB is at, ``None`` for an empty DB."""
    return with_retry(engine, _read_revision, write=False, what="reading the schema version of")


def upgrade(engine: Engine) -> str:
    """Upgrade the DB to head unless it is there already; returns the head revision."""
    if current_revision(engine) == HEAD_REVISION:
        return HEAD_REVISION

    def migrate(connection: Connection) -> None:
        from alembic import command  # lazy: see HEAD_REVISION

        if connection.dialect.name == "postgresql":
            connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_LOCK_KEY})")
        current = _read_revision(connection)
        if current == HEAD_REVISION:
            return  # another process migrated while we waited for the lock
        _check_known(current)
        command.upgrade(alembic_config(connection), "head")

    with_retry(engine, migrate, write=True, what="migrating")
    return HEAD_REVISION


def open_engine(url: str, *, migrate: bool) -> Engine:
    """An engine on the DB at ``url``, reachable and, with ``migrate``, at head (upgraded if
    need be); without, it must be at head already (a reader must not guess at an older or
    newer layout). Every failure is a :class:`MetadataError` without the password."""
    engine = create_metadata_engine(url)
    try:
        with_retry(
            engine, lambda c: c.exec_driver_sql("SELECT 1"), write=False, what="connecting to"
        )
        if migrate:
            upgrade(engine)
        elif (current := current_revision(engine)) != HEAD_REVISION:
            raise MetadataError(
                f"the metadata DB (Airflow connection '{METADATA_CONN_ID}') is at schema "
                f"revision {current!r}, not {HEAD_REVISION!r}. Fix: connect once with "
                "migrate=True (any chunk job or the plan task does)."
            )
    except BaseException:
        engine.dispose()
        raise
    return engine


def _check_known(revision: str | None) -> None:
    """A DB migrated by a newer airflow-cdc must not be touched by this older one."""
    from alembic.script import ScriptDirectory  # lazy: see HEAD_REVISION

    if revision is None:
        return
    script = ScriptDirectory.from_config(alembic_config())
    if revision not in {rev.revision for rev in script.walk_revisions()}:
        raise MetadataError(
            f"the metadata DB (Airflow connection '{METADATA_CONN_ID}') is at schema revision "
            f"{revision!r}, which this airflow-cdc does not know: it was migrated by a newer "
            "version. Fix: install that airflow-cdc version (or newer) everywhere."
        )


def make_revision(url: str, message: str) -> None:  # pragma: no cover - developer tool
    """Write a new revision file autogenerated from the difference to ``schema.py``."""
    from alembic import command  # lazy: see HEAD_REVISION

    engine = create_metadata_engine(url)
    upgrade(engine)
    with engine.begin() as connection:
        command.revision(alembic_config(connection), message=message, autogenerate=True)
