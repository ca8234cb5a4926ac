"""Chunks: the Airflow task instance that ran a chunk's latest attempt (the CDC page links
to it).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27

Written out in full, like 0001, so it stays what it was when ``schema.py`` changes later.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

COLUMNS = ("airflow_dag_id", "airflow_run_id", "airflow_task_id", "airflow_map_index")


def upgrade() -> None:
    with op.batch_alter_table("cdc_chunks") as batch:
        batch.add_column(sa.Column("airflow_dag_id", sa.String(250), nullable=True))
        batch.add_column(sa.Column("airflow_run_id", sa.String(250), nullable=True))
        batch.add_column(sa.Column("airflow_task_id", sa.String(250), nullable=True))
        batch.add_column(sa.Column("airflow_map_index", sa.Integer, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("cdc_chunks") as batch:
        for name in COLUMNS:
            batch.drop_column(name)
