"""Stream progress: how long the last micro-batch took (the watchdog's and the metrics' batch
duration).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24

Written out in full, like 0001, so it stays what it was when ``schema.py`` changes later.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("cdc_stream_state") as batch:
        batch.add_column(sa.Column("last_batch_seconds", sa.Float, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("cdc_stream_state") as batch:
        batch.drop_column("last_batch_seconds")
