"""Tables a stream's pattern selects that it does not follow yet: found, snapshotted by the
stream itself, then joined (plain Python; the Spark stream job calls it).

A stream whose ``tables`` hold a pattern (``shop.*``) looks at the server's catalog at its
start and every ``discover_seconds``. A matching table it neither follows nor has asked for
(a ``CREATE TABLE``, a ``RENAME`` into the pattern, or one created between the plan and the
stream's start) is asked for (``metadata.stream_tables``), planned whole and snapshotted
with the snapshot phase's own code (``snapshot.unit``, on the stream's Spark executors), so
it then joins like a table a backfill added (``stream.joining``: the replay from the
snapshot's oldest high watermark, no restart). Nobody edits ``[cdc] tables`` and no Airflow
run is triggered: the stream's task log and ``airflow-cdc status`` show the table's plan.

What a pass does with each matching table, by its most recent full plan:

* none: plan and snapshot it (a table the stream's own plan covered has one);
* done: ask for it if nobody did (a backfill that asked no stream); it then joins;
* failed, or unfinished and made by this stream (:func:`plan_label`: an earlier driver of
  it died): run that plan's chunks again (each run is idempotent);
* unfinished and made by someone else (a backfill, another stream): wait for it.

A table the stream stopped following because it was dropped (``StreamTable.dropped``) and
that matches again was created again: its plans are the old table's, so it counts as never
planned. A stream of named tables (no pattern) looks for those in the same way, so a table
of it dropped and created again (an ORM's ``DROP TABLE`` + ``CREATE TABLE``) is snapshotted
into a new generation of its replica and followed again.

A table without a key is planned with the chunking column a plan gives it (``stream.
read_schemas.followable_schemas``) and followed as a multiset of rows, as a planned one is.
A table the pattern matches that the product does not follow (a view, a sequence, an
engine it cannot read: ``source.catalog.followable``), or whose columns' rules cannot be
used, or that is gone again before it is read, is logged once, noted for ``airflow-cdc
status`` (``metadata.left_out``, as the stream's) and left out.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from airflow_cdc.config import ChunkingConfig, StreamJobSpec
from airflow_cdc.errors import ConfigurationError, TableError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.left_out import stream_scope
from airflow_cdc.metadata.records import FullSnapshot, PlanRecord
from airflow_cdc.model import LeftOut, TableId, TableSelection
from airflow_cdc.planning.plan_snapshot import plan_snapshot
from airflow_cdc.runner import Runner
from airflow_cdc.sinks.contract.formats import open_sink
from airflow_cdc.snapshot.replacement import replace_planned
from airflow_cdc.source.catalog import list_tables, resolve_tables
from airflow_cdc.source.connection import on_server
from airflow_cdc.stream.own_plans import (
    is_own,
    own_label,
    run_own_plans,
    snapshot_plan,
)
from airflow_cdc.stream.read_schemas import followable_schemas

if TYPE_CHECKING:
    from airflow_cdc.source.connection import DbConnection

__all__ = ["Discovery", "every", "next_step", "plan_label"]

log = logging.getLogger("airflow_cdc.stream")


def plan_label(stream_id: str) -> str:
    """The label of the plans a stream makes for the tables it finds."""
    return own_label(stream_id, "new tables")


def next_step(snapshot: FullSnapshot | None, stream_id: str) -> str:
    """``"plan"``, ``"rerun"``, ``"wait"`` or ``"none"`` for a matching table not joined yet,
    by its most recent full plan (see the module docstring)."""
    if snapshot is None:
        return "plan"
    if snapshot.done:
        return "none"
    if snapshot.failed or is_own(snapshot.label, stream_id):
        return "rerun"
    return "wait"


@dataclass
class Discovery:
    """The stream's search for new tables (``spec.discovery.patterns``); see the module docstring."""

    spec: StreamJobSpec
    #: Tables logged as left out (not followed, or their key unusable), not tried again
    #: until the stream restarts.
    refused: set[TableId] = field(default_factory=set)

    @functools.cached_property
    def selection(self) -> TableSelection | None:
        """The stream's patterns, or without any its tables (a table of them dropped and
        created again is found like a new one)."""
        wanted = self.spec.discovery.patterns or self.spec.tables
        if not wanted:
            return None
        return TableSelection.parse(wanted, self.spec.discovery.exclude_patterns)

    def find(
        self, store: MetadataStore
    ) -> tuple[list[tuple[TableId, FullSnapshot | None]], set[TableId], set[TableId]]:
        """Matching tables the stream has not joined, with their latest full plan; the
        tables the stream has asked for; and those it stopped following as dropped."""

        selection = self.selection
        if selection is None:
            return [], set(), set()
        matched, left_out = on_server(
            self.spec.source,
            lambda conn: _existing(conn, selection),
            what="listing the tables the stream's pattern selects",
        )
        self._leave_out(store, [entry for entry in left_out if entry.table not in self.refused])
        entries = store.stream_tables.read(self.spec.stream_id)
        joined = {entry.table for entry in entries if entry.joined and not entry.dropped}
        # A dropped table found again was created again: not followed, and its latest full
        # plan holds the old table's rows, so it is planned anew like a table never seen.
        dropped = {entry.table for entry in entries if entry.dropped}
        found = [
            (table, None if table in dropped else store.watermarks.full_snapshot(table))
            for table in matched
            if table not in joined and table not in self.refused
        ]
        return found, {entry.table for entry in entries if not entry.dropped}, dropped

    def run_once(self, store: MetadataStore, runner: Runner, parallelism: int) -> list[TableId]:
        """One pass: snapshot what needs it, ask for what a backfill snapshotted; returns
        the tables it snapshotted."""
        found, requested, dropped = self.find(store)
        steps = [(t, s, next_step(s, self.spec.stream_id)) for t, s in found]
        ready = [t for t, _, step in steps if step == "none" and t not in requested]
        if ready:  # snapshotted by someone else (a backfill that asked no stream)
            store.stream_tables.request(
                self.spec.stream_id, ready, requested_by="the stream's pattern"
            )
            log.info("%s match the stream's pattern: they join it", ", ".join(map(str, ready)))
        todo = [(t, s) for t, s, step in steps if step in ("plan", "rerun")]
        fresh = [table for table, snapshot in todo if snapshot is None]
        if fresh:
            self._plan(store, fresh, dropped)
        # The stream's own plans (these new tables' among them) run with run_own_plans;
        # someone else's failed plan of a matching table runs here.
        failed = {
            s.plan_id for _, s in todo if s is not None and not is_own(s.label, self.spec.stream_id)
        }
        snapshotted: list[TableId] = []
        for plan_id in sorted(failed):
            snapshotted += snapshot_plan(self.spec, store, plan_id, runner, parallelism)
        return snapshotted + run_own_plans(self.spec, store, runner, parallelism)

    def _leave_out(self, store: MetadataStore, entries: Sequence[LeftOut]) -> None:
        """Log and note ``entries`` as left out (once each while the stream runs)."""
        for entry in entries:
            log.warning(
                "%s matches the stream's pattern but is left out: %s", entry.table, entry.reason
            )
        store.left_out.note(stream_scope(self.spec.stream_id), entries)
        self.refused.update(entry.table for entry in entries)

    def _plan(self, store: MetadataStore, tables: Sequence[TableId], dropped: set[TableId]) -> None:
        """Plan the tables whole, record the plan and ask for them. A table found again
        after it was dropped (created again, or another renamed to its name) gets a
        replacement Delta table: the one kept holds the old table (``snapshot.
        replacement``)."""

        refused: list[LeftOut] = []

        def plan(conn: DbConnection) -> PlanRecord | None:
            schemas = []
            refused.clear()
            for table in tables:
                try:
                    found = followable_schemas(conn, [table])
                    for schema in found:  # its columns and masks apply, or it is left out
                        self.spec.lake_columns.for_table(schema)
                    schemas.extend(found)
                except (TableError, ConfigurationError) as exc:
                    refused.append(LeftOut(table, str(exc)))
            if not schemas:
                return None
            label = plan_label(self.spec.stream_id)
            chunking = ChunkingConfig(chunk_rows=self.spec.discovery.chunk_rows)
            loaded = [schema.table for schema in schemas]
            record = plan_snapshot(conn, store, loaded, chunking, label).record
            again = {s.table: s for s in schemas if s.table in dropped}
            if again:
                sink = open_sink(self.spec.sink)
                reason = "created again after it was dropped"
                replace_planned(
                    conn,
                    store,
                    sink,
                    record,
                    again,
                    stream_id=None,
                    reason=reason,
                    lake_columns=self.spec.lake_columns,
                )
            return record

        # The plan first: a dropped table asked for again joins once its latest full plan
        # is done, which must not be the old table's (a driver dying in between).
        record = on_server(self.spec.source, plan, what="planning new tables")
        self._leave_out(store, refused)
        if record is None:
            return
        store.stream_tables.request(
            self.spec.stream_id, record.tables, requested_by="the stream's pattern"
        )
        log.info(
            "new table(s) matching %s: %s; snapshotting them (plan %d, %d chunk(s)); each "
            "joins the stream once its snapshot is done",
            ", ".join(self.spec.discovery.patterns),
            ", ".join(map(str, record.tables)),
            record.plan_id,
            len(record.chunks),
        )


def _existing(conn: DbConnection, selection: TableSelection) -> tuple[list[TableId], list[LeftOut]]:
    """The tables ``selection`` picks that the server has now, and those its patterns
    match that are left out (``source.catalog.listing.resolve_tables``)."""
    resolution = resolve_tables(conn, selection)
    if not selection.is_exact:
        return resolution.tables, resolution.left_out
    there = set(list_tables(conn, sorted({t.database for t in resolution.tables})))
    return [table for table in resolution.tables if table in there], []


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
