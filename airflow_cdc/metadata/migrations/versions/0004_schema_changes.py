"""Schema changes: what the stream decided for each DDL statement of a followed table, and
which tables it no longer follows because they were dropped (or renamed away) in the source.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23

Written out in full, like 0001, so it stays what it was when ``schema.py`` changes later.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cdc_schema_changes",
        sa.Column("stream_id", sa.String(200), nullable=False),
        sa.Column("table_name", sa.String(300), nullable=False),
        sa.Column("position", sa.String(160), nullable=False),  # in the key: bounded (MySQL)
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("decision", sa.String(40), nullable=False),
        sa.Column("statement", sa.Text, nullable=True),
        sa.Column("detail", sa.Text, nullable=True),
        sa.Column("recorded_at", sa.DateTime, nullable=False),
        sa.PrimaryKeyConstraint(
            "stream_id", "table_name", "position", "kind", name="pk_cdc_schema_changes"
        ),
    )
    with op.batch_alter_table("cdc_stream_tables") as batch:
        batch.add_column(sa.Column("dropped_position", sa.Text, nullable=True))
        batch.add_column(sa.Column("dropped_reason", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("cdc_stream_tables") as batch:
        batch.drop_column("dropped_reason")
        batch.drop_column("dropped_position")
    op.drop_table("cdc_schema_changes")
