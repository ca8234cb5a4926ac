"""Which of the catalog's tables the product follows, and why it leaves each other out (pure).

A pattern (``shop.*``) selects what :func:`left_out_reason` says it can follow; what else
it matches is left out and named with the reason (the plan's log and ``airflow-cdc
status``: ``metadata.left_out``); a table named exactly that it cannot follow is refused
with the same reason (``source.validation``). Followed: a base table, or a table ``WITH
SYSTEM VERSIONING`` by ``TIMESTAMP(6)`` (whose current rows the lake holds,
``source.system_versioning``), of an engine in :data:`FOLLOWED_ENGINES`: one that keeps its
rows on this server, where a plain ``SELECT`` reads them and its row changes are in this
server's binlog as row events (a ``MEMORY`` table emptied by a restart: a ``TRUNCATE`` the
stream applies). Left out, each for its reason:

* a view: the binlog has no changes of a view (its rows are its tables'); a sequence: a
  number generator's state, not rows;
* an engine that keeps no rows (``BLACKHOLE``), keeps them elsewhere (``FEDERATED``,
  ``CONNECT``, ``SPIDER``: changes made there never reach this binlog), is a union of
  other tables (``MRG_MyISAM``), is not loaded, or any other (not known to the product);
* a table versioned by transaction id (``BIGINT UNSIGNED`` ``ROW START``/``ROW END``):
  MariaDB writes its changes to the binlog as SQL statements even with
  ``binlog_format=ROW``, which no row-based reader can apply.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "FOLLOWED_ENGINES",
    "FOLLOWED_KINDS",
    "SYSTEM_VERSIONED",
    "TableFacts",
    "left_out_reason",
    "versioning_reason",
]

#: ``information_schema.TABLES.TABLE_TYPE`` of a table ``WITH SYSTEM VERSIONING``.
SYSTEM_VERSIONED = "SYSTEM VERSIONED"
#: The kinds of table followed (``TABLE_TYPE``).
FOLLOWED_KINDS = ("BASE TABLE", SYSTEM_VERSIONED)
#: The engines followed (``ENGINE``, compared without case).
FOLLOWED_ENGINES = ("InnoDB", "MyISAM", "Aria", "MEMORY")

#: What the product says of an engine it does not follow, by engine (upper case).
_ENGINE_REASONS = {
    "BLACKHOLE": "it keeps no rows (it discards what is written), so a snapshot would "
    "read none of the rows the binlog shows written",
    "FEDERATED": "its rows are on another server: changes made there never reach this "
    "server's binlog",
    "CONNECT": "its rows are in outside files or another server: changes made there never "
    "reach this server's binlog",
    "SPIDER": "its rows are on other servers: changes made there never reach this server's binlog",
    "MRG_MYISAM": "a MERGE table's rows are those of its MyISAM tables, whose changes the "
    "binlog has under their own names: follow those tables",
}
_TRANSACTION_PRECISE = (
    "it is system-versioned by transaction id (BIGINT UNSIGNED ROW START/ROW END): MariaDB "
    "writes its changes to the binlog as SQL statements even with binlog_format=ROW, and "
    "the stream applies row events only. Version it by TIMESTAMP(6) (ALTER TABLE ... "
    "MODIFY the ROW START/ROW END columns to TIMESTAMP(6)) to follow it"
)


@dataclass(frozen=True, slots=True)
class TableFacts:
    """What the catalog says of a table that decides whether it is followed: its
    ``TABLE_TYPE``, ``ENGINE`` (None: not loaded) and, for a system-versioned table whose
    ``ROW END`` column is listed, that column's ``DATA_TYPE`` (None: not listed, the hidden
    ``row_end`` of ``WITH SYSTEM VERSIONING`` alone, a ``TIMESTAMP(6)``)."""

    kind: str
    engine: str | None
    row_end_type: str | None = None


def left_out_reason(facts: TableFacts) -> str | None:
    """Why a table of these facts is not followed (see the module docstring), else None."""
    kind = facts.kind.upper()
    if kind == "VIEW":
        return (
            "a view: the binlog has no changes of a view's rows (they are the rows of its "
            "tables); follow the tables it reads"
        )
    if kind == "SEQUENCE":
        return "a sequence (CREATE SEQUENCE): a number generator's state, not rows to replicate"
    if kind not in FOLLOWED_KINDS:
        return f"its TABLE_TYPE is {facts.kind!r}, not a kind of table the product follows"
    engine = _engine_reason(facts.engine)
    if engine is not None:
        return engine
    return versioning_reason(facts.row_end_type) if kind == SYSTEM_VERSIONED else None


def versioning_reason(row_end_type: str | None) -> str | None:
    """Why a system-versioned table whose row end column has ``row_end_type``
    (``DATA_TYPE``; None: hidden, a ``TIMESTAMP(6)``) is not followed, else None."""
    if row_end_type is None or row_end_type.lower() == "timestamp":
        return None
    return _TRANSACTION_PRECISE


def _engine_reason(engine: str | None) -> str | None:
    if engine is None:
        return "its storage engine is not loaded on the server (ENGINE is NULL): it cannot be read"
    if engine.casefold() in {e.casefold() for e in FOLLOWED_ENGINES}:
        return None
    why = _ENGINE_REASONS.get(engine.upper())
    if why is not None:
        return f"ENGINE={engine}: {why}"
    return (
        f"ENGINE={engine} is not one the product follows ({', '.join(FOLLOWED_ENGINES)}: "
        "engines known to keep their rows on this server, read by a SELECT, with their "
        "changes in its binlog as row events)"
    )
