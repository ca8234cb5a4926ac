"""The tables each stream follows: asked for (by the stream's own spec or a backfill of a
table new to it) and when the stream joined them.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21

Written out in full, like 0001, so it stays what it was when ``schema.py`` changes later.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cdc_stream_tables",
        sa.Column("stream_id", sa.String(200), nullable=False),
        sa.Column("table_name", sa.String(300), nullable=False),
        sa.Column("requested_at", sa.DateTime, nullable=False),
        sa.Column("requested_by", sa.Text, nullable=True),
        sa.Column("joined_at", sa.DateTime, nullable=True),
        sa.Column("joined_position", sa.Text, nullable=True),
        sa.Column("caught_up_from", sa.Text, nullable=True),
        sa.PrimaryKeyConstraint("stream_id", "table_name", name="pk_cdc_stream_tables"),
    )


def downgrade() -> None:
    op.drop_table("cdc_stream_tables")
