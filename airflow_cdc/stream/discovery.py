"""Tables a stream's pattern selects that it does not follow yet: found, snapshotted by the
stream itself, then joined (plain Python; the Spark stream job calls it).

A stream whose ``tables`` hold a pattern (``shop.*``) looks at the server's catalog at its
start and every ``discover_seconds``. A matching table it neither follows nor has asked for
(a ``CREATE TABLE``, a ``RENAME`` into the pattern, or one created between the plan and the
stream's start) is asked for (``metadata.stream_tables``), planned whole and snapshotted
with the snapshot phase's own code (``snapshot.unit``, on the stream's Spark executors), so
it then joins like a table a backfill added (``stream.joining``: the replay from the
snapshot's oldest high watermark, no restart). Nobody edits ``CDC_TABLES`` and no Airflow
run is triggered: the stream's task log and ``airflow-cdc status`` show the table's plan.

What a pass does with each matching table, by its most recent full plan:

* none: plan and snapshot it (a table the stream's own plan covered has one);
* done: ask for it if nobody did (a backfill that asked no stream); it then joins;
* failed, or unfinished and made by this stream (:func:`plan_label`: an earlier driver of
  it died): run that plan's chunks again (each run is idempotent);
* unfinished and made by someone else (a backfill, another stream): wait for it.

A table the stream stopped following because it was dropped (``StreamTable.dropped``) and
that matches again was created again: its plans are the old table's, so it counts as never
planned.

A table whose key cannot be used (no primary key, say) is logged once and left out.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from airflow_cdc.config import ChunkingConfig, ChunkJobSpec, StreamJobSpec
from airflow_cdc.errors import SnapshotUnitError, TableError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.records import FullSnapshot
from airflow_cdc.model import TableId, TableSelection
from airflow_cdc.planning.packing import PlannedChunk, pack_chunks
from airflow_cdc.planning.planner import plan_tables
from airflow_cdc.snapshot.runners import Runner
from airflow_cdc.snapshot.unit import run_unit
from airflow_cdc.source.catalog import load_table_schema, resolve_selection
from airflow_cdc.source.connection import on_server
from airflow_cdc.source.server import server_info

if TYPE_CHECKING:
    from airflow_cdc.model import TablePlan
    from airflow_cdc.source.connection import DbConnection

__all__ = ["Discovery", "every", "next_step", "plan_label"]

log = logging.getLogger("airflow_cdc.stream")


def plan_label(stream_id: str) -> str:
    """The label of the plans a stream makes for the tables it finds."""
    return f"stream {stream_id}: new tables"


def next_step(snapshot: FullSnapshot | None, stream_id: str) -> str:
    """``"plan"``, ``"rerun"``, ``"wait"`` or ``"none"`` for a matching table not joined yet,
    by its most recent full plan (see the module docstring)."""
    if snapshot is None:
        return "plan"
    if snapshot.done:
        return "none"
    if snapshot.failed or snapshot.label == plan_label(stream_id):
        return "rerun"
    return "wait"


@dataclass
class Discovery:
    """The stream's search for new tables (``spec.discovery.patterns``); see the module docstring."""

    spec: StreamJobSpec
    #: Tables logged as unusable (their key), not tried again until the stream restarts.
    refused: set[TableId] = field(default_factory=set)

    @functools.cached_property
    def selection(self) -> TableSelection | None:
        if not self.spec.discovery.patterns:
            return None
        return TableSelection.parse(
            self.spec.discovery.patterns, self.spec.discovery.exclude_patterns
        )

    def find(
        self, store: MetadataStore
    ) -> tuple[list[tuple[TableId, FullSnapshot | None]], set[TableId]]:
        """Matching tables the stream has not joined, with their latest full plan, and the
        tables the stream has asked for."""

        selection = self.selection
        if selection is None:
            return [], set()
        matched = on_server(
            self.spec.source,
            lambda conn: resolve_selection(conn, selection),
            what="listing the tables the stream's pattern selects",
        )
        entries = store.stream_tables(self.spec.stream_id)
        joined = {entry.table for entry in entries if entry.joined and not entry.dropped}
        # A dropped table found again was created again: not followed, and its latest full
        # plan holds the old table's rows, so it is planned anew like a table never seen.
        dropped = {entry.table for entry in entries if entry.dropped}
        found = [
            (table, None if table in dropped else store.full_snapshot(table))
            for table in matched
            if table not in joined and table not in self.refused
        ]
        return found, {entry.table for entry in entries if not entry.dropped}

    def run_once(self, store: MetadataStore, runner: Runner, parallelism: int) -> list[TableId]:
        """One pass: snapshot what needs it, ask for what a backfill snapshotted; returns
        the tables it snapshotted."""
        found, requested = self.find(store)
        steps = [(t, s, next_step(s, self.spec.stream_id)) for t, s in found]
        ready = [t for t, _, step in steps if step == "none" and t not in requested]
        if ready:  # snapshotted by someone else (a backfill that asked no stream)
            store.request_stream_tables(
                self.spec.stream_id, ready, requested_by="the stream's pattern"
            )
            log.info("%s match the stream's pattern: they join it", ", ".join(map(str, ready)))
        todo = [(t, s) for t, s, step in steps if step in ("plan", "rerun")]
        if not todo:
            return []
        fresh = [table for table, snapshot in todo if snapshot is None]
        stale = sorted({s.plan_id for _, s in todo if s is not None})
        snapshotted: list[TableId] = []
        if fresh:
            planned = self._plan(store, fresh)
            if planned is not None:
                stale.append(planned)
        for plan_id in stale:
            tables = self._snapshot(store, plan_id, runner, parallelism)
            snapshotted.extend(tables)
        return snapshotted

    def _plan(self, store: MetadataStore, tables: Sequence[TableId]) -> int | None:
        """Plan the tables whole, record the plan and ask for them; its id (None: no table
        could be planned)."""

        def plan(conn: DbConnection) -> list[TablePlan]:
            info = server_info(conn)
            schemas = []
            for table in tables:
                try:
                    schemas.append(load_table_schema(conn, table))
                except TableError as exc:
                    self.refused.add(table)
                    log.warning("%s matches the stream's pattern but is left out: %s", table, exc)
            if not schemas:
                return []
            cfg = ChunkingConfig(chunk_rows=self.spec.discovery.chunk_rows)
            return plan_tables(conn, info, schemas, cfg)

        plans = on_server(self.spec.source, plan, what="planning new tables")
        if not plans:
            return None
        planned = [p.table for p in plans]
        # The plan first: a dropped table asked for again joins once its latest full plan
        # is done, which must not be the old table's (a driver dying in between).
        record = store.create_plan(plan_label(self.spec.stream_id), plans)
        store.request_stream_tables(
            self.spec.stream_id, planned, requested_by="the stream's pattern"
        )
        log.info(
            "new table(s) matching %s: %s; snapshotting them (plan %d, %d chunk(s)); each "
            "joins the stream once its snapshot is done",
            ", ".join(self.spec.discovery.patterns),
            ", ".join(map(str, planned)),
            record.plan_id,
            len(record.chunks),
        )
        return record.plan_id

    def _snapshot(
        self, store: MetadataStore, plan_id: int, runner: Runner, parallelism: int
    ) -> list[TableId]:
        """Run the plan's chunks that are not done, a work unit at a time."""

        chunks = [c for c in store.chunks(plan_id) if c.status != "done"]
        planned = [PlannedChunk.of(chunk) for chunk in chunks]
        for unit in pack_chunks(planned, self.spec.discovery.chunk_rows, max(1, len(planned))):
            job = ChunkJobSpec(
                chunk_ids=unit.chunk_ids,
                source=self.spec.source,
                metadata_url=self.spec.metadata_url,
                sink=self.spec.sink,
            )
            try:
                run_unit(job, runner=runner, parallelism=parallelism, driver_share=True)
            except SnapshotUnitError as exc:
                log.warning("snapshot of new table(s) %s: %s", unit.label(), exc)
        return list(dict.fromkeys(c.table for c in chunks))


def every(seconds: float, stop: Callable[[float], bool], action: Callable[[], object]) -> None:
    """``action()`` now and then every ``seconds`` until ``stop(seconds)`` (an Event's wait)
    says so; an error is logged, and the next pass tries again."""
    while True:
        try:
            action()
        except Exception:
            log.exception("looking for new tables failed; trying again in %.0f s", seconds)
        if stop(seconds):
            return
