"""Stream leases: where the owner runs, beside its token.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03

A lease's ``owner`` is now a random token per stream run, never parsed; this column holds
the host name and pid the owner reported, for messages and status only. The owner of a
lease taken before this revision (``host:pid:suffix``) stays its owner, read as a token.

Written out in full, like 0001, so it stays what it was when ``schema.py`` changes later.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("cdc_stream_state") as batch:
        batch.add_column(sa.Column("owner_process", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("cdc_stream_state") as batch:
        batch.drop_column("owner_process")
