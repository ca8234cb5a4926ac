"""The tables a plan's or a stream's patterns matched and left out, and why.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01

Written out in full, like 0001, so it stays what it was when ``schema.py`` changes later.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cdc_left_out",
        sa.Column("noted_by", sa.String(250), primary_key=True),
        sa.Column("table_name", sa.String(300), primary_key=True),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("noted_at", sa.DateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("cdc_left_out")
