"""Stream lease and progress: lease start, last micro-batch, row total; the lease lock row.

Revision ID: 0002
Revises: 0001
Create Date: 2025-12-01

Written out in full, like 0001, so it stays what it was when ``schema.py`` changes later.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("cdc_stream_state") as batch:
        batch.add_column(sa.Column("lease_acquired_at", sa.DateTime, nullable=True))
        batch.add_column(sa.Column("last_batch_id", sa.BigInteger, nullable=True))
        batch.add_column(sa.Column("last_batch_rows", sa.BigInteger, nullable=True))
        batch.add_column(
            sa.Column("rows_total", sa.BigInteger, nullable=False, server_default=sa.text("0"))
        )
    lock = op.create_table(
        "cdc_stream_lease_lock",
        sa.Column("lock_id", sa.Integer, autoincrement=False, nullable=False),
        sa.Column("acquisitions", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("lock_id", name="pk_cdc_stream_lease_lock"),
    )
    assert lock is not None
    op.bulk_insert(lock, [{"lock_id": 1, "acquisitions": 0}])


def downgrade() -> None:
    op.drop_table("cdc_stream_lease_lock")
    with op.batch_alter_table("cdc_stream_state") as batch:
        batch.drop_column("rows_total")
        batch.drop_column("last_batch_rows")
        batch.drop_column("last_batch_id")
        batch.drop_column("lease_acquired_at")
