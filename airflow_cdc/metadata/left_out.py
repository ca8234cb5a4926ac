"""The tables a selection's patterns matched that were left out, and why (``cdc_left_out``,
``MetadataStore.left_out``): a view, a sequence, an engine the product does not follow
(``source.catalog.followable``), one a stream's search for new tables could not take.

A plan notes what its selection left out when it is made (``noted_by``:
:func:`plan_scope`), a stream what its search for new tables left out (:func:`stream_scope`);
``airflow-cdc status`` shows the latest plan's and each stream's. Noting a table again
replaces its row.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from airflow_cdc.metadata import codec
from airflow_cdc.metadata.engine import upsert, with_retry
from airflow_cdc.metadata.schema import left_out as t_left_out
from airflow_cdc.model import LeftOut

__all__ = ["LeftOutTables", "plan_scope", "stream_scope"]


def plan_scope(plan_id: int) -> str:
    """Who noted what a plan's selection left out."""
    return f"plan:{plan_id}"


def stream_scope(stream_id: str) -> str:
    """Who noted what a stream's search for new tables left out."""
    return f"stream:{stream_id}"


class LeftOutTables:
    """What selections left out (``MetadataStore.left_out``)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def note(self, noted_by: str, entries: Sequence[LeftOut]) -> None:
        """Note ``entries`` as left out by ``noted_by`` (one transaction)."""
        if not entries:
            return
        now = codec.to_db_time(codec.utc_now())

        def write(connection: Connection) -> None:
            for entry in entries:
                key = {"noted_by": noted_by, "table_name": codec.table_to_text(entry.table)}
                upsert(connection, t_left_out, key, {"reason": entry.reason, "noted_at": now})

        with_retry(self._engine, write, write=True, what="noting tables left out in")

    def read(self, noted_by: str) -> list[LeftOut]:
        """What ``noted_by`` left out, by table."""

        def read(connection: Connection) -> list[LeftOut]:
            rows = connection.execute(
                sa.select(t_left_out.c.table_name, t_left_out.c.reason)
                .where(t_left_out.c.noted_by == noted_by)
                .order_by(t_left_out.c.table_name)
            )
            return [LeftOut(codec.table_from_text(name), reason) for name, reason in rows]

        return with_retry(self._engine, read, write=False, what="reading tables left out from")
