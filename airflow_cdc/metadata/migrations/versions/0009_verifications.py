"""Each table's verifications: what a check of the replica against the source found.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25

Written out in full, like 0001, so it stays what it was when ``schema.py`` changes later.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cdc_verifications",
        sa.Column("verification_id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_label", sa.String(250), nullable=False),
        sa.Column("table_name", sa.String(300), nullable=False),
        sa.Column("checked_at", sa.DateTime, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("cut", sa.Text, nullable=True),
        sa.Column("rows", sa.BigInteger, nullable=False),
        sa.Column("ranges", sa.Integer, nullable=False),
        sa.Column("passes", sa.Integer, nullable=False),
        sa.Column("differences", sa.Integer, nullable=False),
        sa.Column("keys", sa.Text, nullable=False),
        sa.Column("repair_plan_id", sa.Integer, nullable=True),
        sa.Column("seconds", sa.Float, nullable=False),
        sa.Column("notes", sa.Text, nullable=False),
    )
    op.create_index(
        "ix_cdc_verifications_table_name", "cdc_verifications", ["table_name"]
    )


def downgrade() -> None:
    op.drop_index("ix_cdc_verifications_table_name", "cdc_verifications")
    op.drop_table("cdc_verifications")
