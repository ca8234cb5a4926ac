"""Alembic environment: migrate over the connection that ``metadata.migrate`` passes in.

There is no ``alembic.ini``; the store builds the Config in code and hands over an open
connection whose transaction it owns (so the version check and the upgrade are one
transaction, serialized against other processes). New revisions: see ``migrate.py``.
"""

from __future__ import annotations

from alembic import context

from airflow_cdc.metadata.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "airflow-cdc migrations run through airflow_cdc.metadata.migrate, not the alembic CLI"
    )

context.configure(
    connection=connection,
    target_metadata=metadata,
    # SQLite cannot ALTER most things; batch mode recreates the table in later revisions.
    render_as_batch=True,
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
