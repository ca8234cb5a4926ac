"""Each table's verifications (``cdc_verifications``): what a check of the replica against
the source found (``verify.check``), and the plan its repair made, if any."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from airflow_cdc.metadata import codec
from airflow_cdc.metadata.engine import with_retry
from airflow_cdc.metadata.schema import verifications as t_verifications
from airflow_cdc.model import BinlogPosition, TableId

__all__ = ["VERIFICATION_STATUSES", "Verification", "Verifications"]

#: ``clean``: the replica equals the source; ``differs``: keys differ (listed);
#: ``repairing``: they differ and a plan re-snapshots them; ``failed``: no answer.
VERIFICATION_STATUSES = ("clean", "differs", "repairing", "failed")
#: Characters of the keys' text kept (the count is kept whole).
MAX_KEYS_TEXT = 4000


@dataclass(frozen=True)
class Verification:
    """One table's verification."""

    run_label: str
    table: TableId
    checked_at: dt.datetime
    status: str
    cut: BinlogPosition | None
    rows: int
    ranges: int
    passes: int
    differences: int
    keys: str
    seconds: float
    notes: str = ""
    repair_plan_id: int | None = None

    def __post_init__(self) -> None:
        if self.status not in VERIFICATION_STATUSES:
            raise ValueError(f"verification status {self.status!r} not in {VERIFICATION_STATUSES}")


class Verifications:
    """The metadata DB's verifications (``MetadataStore.verifications``)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def record(self, found: Verification) -> None:
        def write(connection: Connection) -> None:
            connection.execute(
                sa.insert(t_verifications).values(
                    run_label=found.run_label[:250],
                    table_name=codec.table_to_text(found.table),
                    checked_at=codec.to_db_time(found.checked_at),
                    status=found.status,
                    cut=codec.encode_position(found.cut),
                    rows=found.rows,
                    ranges=found.ranges,
                    passes=found.passes,
                    differences=found.differences,
                    keys=found.keys[:MAX_KEYS_TEXT],
                    repair_plan_id=found.repair_plan_id,
                    seconds=found.seconds,
                    notes=found.notes,
                )
            )

        with_retry(self._engine, write, write=True, what="recording a verification in")

    def latest(self, tables: Sequence[TableId] | None = None) -> list[Verification]:
        """The newest verification of each table (of ``tables``; None: every table)."""

        def read(connection: Connection) -> list[Verification]:
            newest = sa.select(
                t_verifications.c.table_name,
                sa.func.max(t_verifications.c.verification_id).label("newest"),
            ).group_by(t_verifications.c.table_name)
            if tables is not None:
                newest = newest.where(
                    t_verifications.c.table_name.in_([codec.table_to_text(t) for t in tables])
                )
            ids = newest.subquery()
            rows = connection.execute(
                sa.select(t_verifications)
                .join(ids, t_verifications.c.verification_id == ids.c.newest)
                .order_by(t_verifications.c.table_name)
            )
            return [_record(row) for row in rows.mappings()]

        return with_retry(self._engine, read, write=False, what="reading verifications from")


def _record(row: sa.RowMapping) -> Verification:
    checked = codec.from_db_time(row["checked_at"])
    assert checked is not None  # NOT NULL
    return Verification(
        run_label=row["run_label"],
        table=codec.table_from_text(row["table_name"]),
        checked_at=checked,
        status=row["status"],
        cut=codec.decode_position(row["cut"]),
        rows=int(row["rows"]),
        ranges=int(row["ranges"]),
        passes=int(row["passes"]),
        differences=int(row["differences"]),
        keys=row["keys"],
        seconds=float(row["seconds"]),
        notes=row["notes"],
        repair_plan_id=row["repair_plan_id"],
    )
