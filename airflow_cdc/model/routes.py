"""Which lake table a source table's rows go to: ``routes`` merge sharded tables into one
(Flink CDC's routes; issue 49).

``routes`` maps a table pattern (the forms of ``model.selection``) to a table
``<database>.<table>``: every source table the pattern matches is written into that one
lake table, its rows told apart by ``_cdc_source_table`` (the source table's name), which
joins the key, so equal keys of two shards are two rows. ``unique_keys`` says the keys
are unique across the sources: the key stays the source's, and a row of one shard
replaces another shard's row of the same key.

A table no pattern matches goes to its own lake table, as without routes. A table two
patterns route to different targets, or a target that is also a source table some
pattern leaves unrouted, is refused (:meth:`Routes.target_of`, :meth:`Routes.check`).
Chunks, the hand-off, the emit filter and verify stay per source table: only where rows
land changes (``sinks.routes.routed``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from airflow_cdc.model.selection import TablePattern
from airflow_cdc.model.table import TableId

__all__ = ["NO_ROUTES", "Routes"]


@dataclass(frozen=True)
class Routes:
    """Patterns of source tables and the lake table each routes to, in the order given."""

    entries: tuple[tuple[TablePattern, TableId], ...] = ()
    #: The keys are unique across each target's sources (the key is not widened).
    unique_keys: bool = False

    @classmethod
    def parse(cls, routes: Mapping[str, str], *, unique_keys: bool = False) -> Routes:
        """``{"<table pattern>": "<database>.<table>"}``; ``ValueError`` naming the entry
        for a pattern or a target that does not parse."""
        entries = []
        for pattern, target in routes.items():
            try:
                entries.append((TablePattern.parse(pattern), TableId.parse(str(target))))
            except ValueError as exc:
                raise ValueError(f"route {pattern!r}: {exc}") from None
        return cls(tuple(entries), unique_keys)

    def texts(self) -> dict[str, str]:
        """The routes in the form :meth:`parse` takes."""
        return {pattern.text: str(target) for pattern, target in self.entries}

    def __bool__(self) -> bool:
        return bool(self.entries)

    def target_of(self, table: TableId) -> TableId | None:
        """The lake table ``table``'s rows go to when a route takes it (None: its own);
        ``ValueError`` when two routes send it to different tables."""
        targets = {target for pattern, target in self.entries if pattern.matches(table)}
        if len(targets) > 1:
            listed = ", ".join(sorted(str(t) for t in targets))
            raise ValueError(
                f"{table} is routed to several tables ({listed}): make the route patterns "
                "match it once"
            )
        return next(iter(targets), None)

    def lake_table(self, table: TableId) -> TableId:
        """Where ``table``'s rows land: its route's target, else its own name."""
        return self.target_of(table) or table

    def check(self, tables: Iterable[TableId]) -> None:
        """``ValueError`` when a route's target is the lake table of one of ``tables``
        that no route takes (two writers of one table that do not tell their rows apart),
        or one of ``tables`` is routed ambiguously."""
        listed = list(tables)
        targets = {self.target_of(t) for t in listed} - {None}
        for table in listed:
            if table in targets and self.target_of(table) is None:
                raise ValueError(
                    f"{table} is a route's target and a source table no route takes: "
                    "route it too, or route the others to another name"
                )


NO_ROUTES = Routes()
