"""Where each stream had committed, and when: recorded by table upkeep, so it purges a
delete marker only once the stream passed it a retention ago.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24

Written out in full, like 0001, so it stays what it was when ``schema.py`` changes later.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cdc_position_marks",
        sa.Column("stream_id", sa.String(200), primary_key=True),
        sa.Column("recorded_at", sa.DateTime, primary_key=True),
        sa.Column("position", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("cdc_position_marks")
