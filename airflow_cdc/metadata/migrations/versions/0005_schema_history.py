"""Schema history: a source table's columns from a binlog position on (recorded by each
chunk at its high watermark and by the stream at each change of columns it carries out), so
a replayed batch and a restarted stream read each table with the columns its changes were
written with (the source's catalog may have moved on since).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24

Written out in full, like 0001, so it stays what it was when ``schema.py`` changes later.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cdc_schema_history",
        sa.Column("table_name", sa.String(300), nullable=False),
        sa.Column("position", sa.String(160), nullable=False),  # in the key: bounded (MySQL)
        sa.Column("position_sort", sa.String(40), nullable=False),
        sa.Column("table_schema", sa.Text, nullable=False),
        sa.Column("recorded_at", sa.DateTime, nullable=False),
        sa.PrimaryKeyConstraint("table_name", "position", name="pk_cdc_schema_history"),
    )


def downgrade() -> None:
    op.drop_table("cdc_schema_history")
