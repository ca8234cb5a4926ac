"""Initial schema: plans, their tables, chunks, and the stream's state.

Revision ID: 0001
Revises:
Create Date: 2025-11-21

Written out in full (not imported from ``schema.py``) so this revision stays what it was
when later revisions change ``schema.py``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    _create_plans()
    _create_plan_tables()
    _create_chunks()
    _create_stream_state()


def _create_plans() -> None:
    op.create_table(
        "cdc_plans",
        sa.Column("plan_id", sa.Integer, autoincrement=True, nullable=False),
        sa.Column("label", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.CheckConstraint(
            "status IN ('planned', 'running', 'done')", name="ck_cdc_plans_status"
        ),
        sa.PrimaryKeyConstraint("plan_id", name="pk_cdc_plans"),
        sqlite_autoincrement=True,
    )


def _create_plan_tables() -> None:
    op.create_table(
        "cdc_plan_tables",
        sa.Column("plan_id", sa.Integer, nullable=False),
        sa.Column("table_name", sa.String(300), nullable=False),
        sa.Column("key_columns", sa.Text, nullable=False),
        sa.Column("method", sa.String(16), nullable=False),
        sa.Column("estimated_rows", sa.BigInteger, nullable=False),
        sa.Column("chunk_count", sa.Integer, nullable=False),
        sa.ForeignKeyConstraint(
            ["plan_id"], ["cdc_plans.plan_id"], name="fk_cdc_plan_tables_plan_id_cdc_plans"
        ),
        sa.PrimaryKeyConstraint("plan_id", "table_name", name="pk_cdc_plan_tables"),
    )
    op.create_index("ix_cdc_plan_tables_table_name", "cdc_plan_tables", ["table_name"])


def _create_chunks() -> None:
    op.create_table(
        "cdc_chunks",
        sa.Column("chunk_id", sa.Integer, autoincrement=True, nullable=False),
        sa.Column("plan_id", sa.Integer, nullable=False),
        sa.Column("table_name", sa.String(300), nullable=False),
        sa.Column("chunk_no", sa.Integer, nullable=False),
        sa.Column("lo", sa.Text, nullable=True),
        sa.Column("hi", sa.Text, nullable=True),
        sa.Column("estimated_rows", sa.BigInteger, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("rows", sa.BigInteger, nullable=True),
        sa.Column("low_watermark", sa.Text, nullable=True),
        sa.Column("high_watermark", sa.Text, nullable=True),
        sa.Column("high_watermark_encoded", sa.String(38), nullable=True),
        sa.Column("started_at", sa.DateTime, nullable=True),
        sa.Column("finished_at", sa.DateTime, nullable=True),
        sa.Column("read_seconds", sa.Float, nullable=True),
        sa.Column("correct_seconds", sa.Float, nullable=True),
        sa.Column("write_seconds", sa.Float, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.CheckConstraint(
            "status IN ('pending', 'running', 'done', 'failed')", name="ck_cdc_chunks_status"
        ),
        sa.ForeignKeyConstraint(
            ["plan_id"], ["cdc_plans.plan_id"], name="fk_cdc_chunks_plan_id_cdc_plans"
        ),
        sa.ForeignKeyConstraint(
            ["plan_id", "table_name"],
            ["cdc_plan_tables.plan_id", "cdc_plan_tables.table_name"],
            name="fk_cdc_chunks_plan_id_table_name_cdc_plan_tables",
        ),
        sa.PrimaryKeyConstraint("chunk_id", name="pk_cdc_chunks"),
        sa.UniqueConstraint(
            "plan_id", "table_name", "chunk_no", name="uq_cdc_chunks_plan_id_table_name_chunk_no"
        ),
        sqlite_autoincrement=True,
    )


def _create_stream_state() -> None:
    op.create_table(
        "cdc_stream_state",
        sa.Column("stream_id", sa.String(200), nullable=False),
        sa.Column("tables", sa.Text, nullable=False),
        sa.Column("committed_position", sa.Text, nullable=True),
        sa.Column("lag_seconds", sa.Float, nullable=True),
        sa.Column("lag_bytes", sa.BigInteger, nullable=True),
        sa.Column("heartbeat_at", sa.DateTime, nullable=True),
        sa.Column("owner", sa.Text, nullable=True),
        sa.Column("lease_expires_at", sa.DateTime, nullable=True),
        sa.PrimaryKeyConstraint("stream_id", name="pk_cdc_stream_state"),
    )


def downgrade() -> None:
    op.drop_table("cdc_stream_state")
    op.drop_table("cdc_chunks")
    op.drop_index("ix_cdc_plan_tables_table_name", table_name="cdc_plan_tables")
    op.drop_table("cdc_plan_tables")
    op.drop_table("cdc_plans")
