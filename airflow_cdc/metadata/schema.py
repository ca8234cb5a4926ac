"""The metadata DB's tables, as SQLAlchemy Core objects.

The migrations under ``migrations/versions`` create these tables; this module is what the
store's queries are written against. ``tests/unit/test_metadata_store.py`` checks that a
migrated DB and this module agree, so a change here without a migration fails the tests.

Types are portable (SQLite and PostgreSQL): JSON travels as text, binlog positions as text,
and the sortable high-watermark encoding as zero-padded decimal text because it needs up to
28 digits (more than a 64-bit integer holds).
"""

from __future__ import annotations

import sqlalchemy as sa

__all__ = [
    "CHUNK_STATUSES",
    "PLAN_STATUSES",
    "TABLE_NAME_LENGTH",
    "chunks",
    "left_out",
    "metadata",
    "plan_tables",
    "plans",
    "schema_changes",
    "stream_lease_lock",
    "stream_state",
    "stream_tables",
    "verifications",
]

#: Constraint names are fixed so later migrations (SQLite batch mode) can address them.
NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

#: ``db.table`` with backtick quoting: two 64-character names, every character a doubled
#: backtick at worst, fit. A bounded string (not TEXT) so MySQL can index it too.
TABLE_NAME_LENGTH = 300

CHUNK_STATUSES = ("pending", "running", "done", "failed")
PLAN_STATUSES = ("planned", "running", "done")

metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)

plans = sa.Table(
    "cdc_plans",
    metadata,
    sa.Column("plan_id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("label", sa.Text, nullable=False),
    sa.Column("created_at", sa.DateTime, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.CheckConstraint("status IN ('planned', 'running', 'done')", name="status"),
    # Ids are handed to Airflow (XCom, job files): never reuse one, even after a delete.
    sqlite_autoincrement=True,
)

plan_tables = sa.Table(
    "cdc_plan_tables",
    metadata,
    sa.Column("plan_id", sa.Integer, sa.ForeignKey("cdc_plans.plan_id"), primary_key=True),
    sa.Column("table_name", sa.String(TABLE_NAME_LENGTH), primary_key=True),
    sa.Column("key_columns", sa.Text, nullable=False),
    sa.Column("method", sa.String(16), nullable=False),
    sa.Column("estimated_rows", sa.BigInteger, nullable=False),
    sa.Column("chunk_count", sa.Integer, nullable=False),
    sa.Index(None, "table_name"),
)

chunks = sa.Table(
    "cdc_chunks",
    metadata,
    sa.Column("chunk_id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("plan_id", sa.Integer, sa.ForeignKey("cdc_plans.plan_id"), nullable=False),
    sa.Column("table_name", sa.String(TABLE_NAME_LENGTH), nullable=False),
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
    # The Airflow task instance of the latest attempt (none for a job run without Airflow).
    sa.Column("airflow_dag_id", sa.String(250), nullable=True),
    sa.Column("airflow_run_id", sa.String(250), nullable=True),
    sa.Column("airflow_task_id", sa.String(250), nullable=True),
    sa.Column("airflow_map_index", sa.Integer, nullable=True),
    sa.UniqueConstraint("plan_id", "table_name", "chunk_no"),
    sa.ForeignKeyConstraint(
        ["plan_id", "table_name"], ["cdc_plan_tables.plan_id", "cdc_plan_tables.table_name"]
    ),
    sa.CheckConstraint("status IN ('pending', 'running', 'done', 'failed')", name="status"),
    sqlite_autoincrement=True,
)

stream_state = sa.Table(
    "cdc_stream_state",
    metadata,
    sa.Column("stream_id", sa.String(200), primary_key=True),
    sa.Column("tables", sa.Text, nullable=False),
    sa.Column("committed_position", sa.Text, nullable=True),
    sa.Column("lag_seconds", sa.Float, nullable=True),
    sa.Column("lag_bytes", sa.BigInteger, nullable=True),
    sa.Column("heartbeat_at", sa.DateTime, nullable=True),
    sa.Column("owner", sa.Text, nullable=True),
    sa.Column("lease_expires_at", sa.DateTime, nullable=True),
    # Revision 0002: lease start and micro-batch progress.
    sa.Column("lease_acquired_at", sa.DateTime, nullable=True),
    sa.Column("last_batch_id", sa.BigInteger, nullable=True),
    sa.Column("last_batch_rows", sa.BigInteger, nullable=True),
    sa.Column("rows_total", sa.BigInteger, nullable=False, server_default=sa.text("0")),
    # Revision 0006: the last micro-batch's duration.
    sa.Column("last_batch_seconds", sa.Float, nullable=True),
    # Revision 0011: where the lease's owner (a token, in ``owner``) runs, for people.
    sa.Column("owner_process", sa.Text, nullable=True),
)

#: One row (``lock_id = 1``) that every lease acquisition updates first: the row lock
#: serializes acquisitions on every database (SQLite's ``BEGIN IMMEDIATE`` does already), so
#: two streams on overlapping tables cannot both pass the "tables are free" check.
stream_lease_lock = sa.Table(
    "cdc_stream_lease_lock",
    metadata,
    sa.Column("lock_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("acquisitions", sa.BigInteger, nullable=False),
)

#: Revision 0003: the tables a stream follows. A row is *requested* (by the stream's own
#: table list, or by a backfill of a table the stream does not follow yet) until the stream
#: *joins* it: after the table's full snapshot is done, the stream replays the table's binlog
#: from the snapshot's oldest high watermark (``caught_up_from``) up to where it stands, and
#: from then on reads the table in every micro-batch (``joined_position``: where it joined).
stream_tables = sa.Table(
    "cdc_stream_tables",
    metadata,
    sa.Column("stream_id", sa.String(200), primary_key=True),
    sa.Column("table_name", sa.String(TABLE_NAME_LENGTH), primary_key=True),
    sa.Column("requested_at", sa.DateTime, nullable=False),
    sa.Column("requested_by", sa.Text, nullable=True),
    sa.Column("joined_at", sa.DateTime, nullable=True),
    sa.Column("joined_position", sa.Text, nullable=True),
    sa.Column("caught_up_from", sa.Text, nullable=True),
    # Revision 0004: the table was dropped (or renamed away) in the source at this position;
    # the stream no longer reads it until it is asked for again (``StreamTables.request``).
    sa.Column("dropped_position", sa.Text, nullable=True),
    sa.Column("dropped_reason", sa.Text, nullable=True),
)

#: Revision 0004: what the stream did about each DDL statement of a table it follows, one
#: row per (table, position, kind): ``kind`` is ``model.DdlKind``'s value, ``decision`` the
#: stream's (``stream.schema_decisions``), ``statement`` the DDL as logged (cut to 4000
#: characters). A replayed batch writes its row again, never a second one.
schema_changes = sa.Table(
    "cdc_schema_changes",
    metadata,
    sa.Column("stream_id", sa.String(200), primary_key=True),
    sa.Column("table_name", sa.String(TABLE_NAME_LENGTH), primary_key=True),
    sa.Column("position", sa.String(160), primary_key=True),  # bounded: a key (MySQL)
    sa.Column("kind", sa.String(40), primary_key=True),
    sa.Column("decision", sa.String(40), nullable=False),
    sa.Column("statement", sa.Text, nullable=True),
    sa.Column("detail", sa.Text, nullable=True),
    sa.Column("recorded_at", sa.DateTime, nullable=False),
)

#: Revision 0005: the schema history, one row per (table, position): the source table's
#: columns and key from ``position`` on. Each chunk records the columns it read with at its
#: high watermark, and the stream each change of columns it carries out at its position, so
#: a batch (replayed or not, by a stream restarted behind an ``ALTER`` or not) reads each
#: table with the columns its changes were written with, whatever the catalog says by then.
schema_history = sa.Table(
    "cdc_schema_history",
    metadata,
    sa.Column("table_name", sa.String(TABLE_NAME_LENGTH), primary_key=True),
    sa.Column("position", sa.String(160), primary_key=True),  # bounded: a key (MySQL)
    sa.Column("position_sort", sa.String(40), nullable=False),  # codec.position_sort_text
    sa.Column("table_schema", sa.Text, nullable=False),  # codec.schema_to_text
    sa.Column("recorded_at", sa.DateTime, nullable=False),
)

#: Revision 0007: where each stream had committed, and when, one row per upkeep run
#: (``metadata.position_marks``): upkeep purges a delete marker only if the stream had
#: passed it at least a retention ago (``metadata.marker_floor``).
position_marks = sa.Table(
    "cdc_position_marks",
    metadata,
    sa.Column("stream_id", sa.String(200), primary_key=True),
    sa.Column("recorded_at", sa.DateTime, primary_key=True),
    sa.Column("position", sa.Text, nullable=False),
)

#: Revision 0008: the source servers positions were read from, one row per epoch
#: (``metadata.servers``): a server seen for the first time, or again after another one,
#: starts the next epoch, which every position read from it carries (``model.position``).
source_servers = sa.Table(
    "cdc_source_servers",
    metadata,
    sa.Column("epoch", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("server_id", sa.BigInteger, nullable=False),
    sa.Column("first_seen_at", sa.DateTime, nullable=False),
)

#: Revision 0008: GTID states at positions (chunks' high watermarks, the stream's committed
#: positions), the way to the same place in another server's binlog after a failover.
gtid_points = sa.Table(
    "cdc_gtid_points",
    metadata,
    sa.Column("position", sa.String(160), primary_key=True),
    sa.Column("position_sort", sa.String(40), nullable=False),  # codec.position_sort_text
    sa.Column("gtid", sa.Text, nullable=False),
    sa.Column("recorded_by", sa.String(200), nullable=False),
    sa.Column("recorded_at", sa.DateTime, nullable=False),
)

#: Revision 0009: each table's verifications (``metadata.verifications``): what a check of
#: the replica against the source found, and what its repair planned.
verifications = sa.Table(
    "cdc_verifications",
    metadata,
    sa.Column("verification_id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_label", sa.String(250), nullable=False),
    sa.Column("table_name", sa.String(TABLE_NAME_LENGTH), nullable=False, index=True),
    sa.Column("checked_at", sa.DateTime, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),  # VERIFICATION_STATUSES
    sa.Column("cut", sa.Text, nullable=True),  # codec.encode_position
    sa.Column("rows", sa.BigInteger, nullable=False),
    sa.Column("ranges", sa.Integer, nullable=False),
    sa.Column("passes", sa.Integer, nullable=False),
    sa.Column("differences", sa.Integer, nullable=False),
    sa.Column("keys", sa.Text, nullable=False),  # what the keys were, as text
    sa.Column("repair_plan_id", sa.Integer, nullable=True),
    sa.Column("seconds", sa.Float, nullable=False),
    sa.Column("notes", sa.Text, nullable=False),
)

#: Revision 0011: the tables a selection's patterns matched that were left out, and why
#: (``metadata.left_out``), one row per table of each plan (``noted_by`` ``plan:<id>``) or
#: stream (``stream:<id>``, the tables its search for new ones left out).
left_out = sa.Table(
    "cdc_left_out",
    metadata,
    sa.Column("noted_by", sa.String(250), primary_key=True),
    sa.Column("table_name", sa.String(TABLE_NAME_LENGTH), primary_key=True),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("noted_at", sa.DateTime, nullable=False),
)
