"""The source servers positions were read from (one per epoch) and GTID states at
positions: what a stream needs to go on after a failover.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25

Written out in full, like 0001, so it stays what it was when ``schema.py`` changes later.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cdc_source_servers",
        sa.Column("epoch", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("server_id", sa.BigInteger, nullable=False),
        sa.Column("first_seen_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "cdc_gtid_points",
        sa.Column("position", sa.String(160), primary_key=True),
        sa.Column("position_sort", sa.String(40), nullable=False),
        sa.Column("gtid", sa.Text, nullable=False),
        sa.Column("recorded_by", sa.String(200), nullable=False),
        sa.Column("recorded_at", sa.DateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("cdc_gtid_points")
    op.drop_table("cdc_source_servers")
