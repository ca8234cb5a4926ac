"""The metadata DB's API: plans, chunk status and watermarks, the stream's state.

Every method is one short transaction (see :func:`engine.with_retry`), so chunk jobs in
separate processes can update their own chunks at the same time. Methods return frozen
records; nothing here holds a connection between calls. The store is the public face; each
of its parts is a class of its own module, holding the engine and owning its queries:
``store.plans`` (``plans``), ``store.chunks`` (``chunks``), ``store.watermarks``
(``watermarks``), ``store.streams`` (``stream``), ``store.stream_tables``
(``stream_tables``), ``store.schema_changes`` (``schema_changes``),
``store.schema_history`` (``schema_history``), ``store.servers`` (``servers``),
``store.verifications`` (``verifications``) and ``store.left_out`` (``left_out``).
"""

from __future__ import annotations

from types import TracebackType

from sqlalchemy.engine import Engine

from airflow_cdc.metadata.chunks import Chunks
from airflow_cdc.metadata.left_out import LeftOutTables
from airflow_cdc.metadata.migrate import open_engine
from airflow_cdc.metadata.plans import Plans
from airflow_cdc.metadata.schema_changes import SchemaChanges
from airflow_cdc.metadata.schema_history import SchemaHistory
from airflow_cdc.metadata.servers import SourceServers
from airflow_cdc.metadata.stream import Streams
from airflow_cdc.metadata.stream_tables import StreamTables
from airflow_cdc.metadata.verifications import Verifications
from airflow_cdc.metadata.watermarks import Watermarks

__all__ = ["MetadataStore"]


class MetadataStore:
    """Chunk plans and their progress in the metadata DB (Airflow connection ``cdc_metadata``)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @classmethod
    def connect(cls, url: str, *, migrate: bool = True) -> MetadataStore:
        """Open the DB at ``url`` and, with ``migrate``, bring its schema to head.

        Without ``migrate`` the schema must already be at head. Every failure is a
        :class:`MetadataError` without the password (:func:`.migrate.open_engine`).
        """
        return cls(open_engine(url, migrate=migrate))

    @property
    def url(self) -> str:
        """The DB's URL with the password masked (safe to log)."""
        return self._engine.url.render_as_string(hide_password=True)

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> MetadataStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MetadataStore({self.url!r})"

    @property
    def plans(self) -> Plans:
        """The chunk plans: recording one, reading it back, its progress (``metadata.plans``)."""
        return Plans(self._engine)

    @property
    def chunks(self) -> Chunks:
        """The chunks and their statuses (``metadata.chunks``)."""
        return Chunks(self._engine)

    @property
    def watermarks(self) -> Watermarks:
        """What the chunks tell the stream: watermarks, floors, full snapshots
        (``metadata.watermarks``)."""
        return Watermarks(self._engine)

    @property
    def streams(self) -> Streams:
        """The streams' leases and progress, and their marker floors (``metadata.stream``)."""
        return Streams(self._engine)

    @property
    def stream_tables(self) -> StreamTables:
        """The tables each stream follows, joins or saw dropped (``metadata.stream_tables``)."""
        return StreamTables(self._engine)

    @property
    def schema_changes(self) -> SchemaChanges:
        """The schema changes each stream met and what it did (``metadata.schema_changes``)."""
        return SchemaChanges(self._engine)

    @property
    def schema_history(self) -> SchemaHistory:
        """Each table's columns from a position on (``metadata.schema_history``)."""
        return SchemaHistory(self._engine)

    @property
    def servers(self) -> SourceServers:
        """The source servers (epochs) and GTID points (``metadata.servers``)."""
        return SourceServers(self._engine)

    @property
    def verifications(self) -> Verifications:
        """Each table's verifications (``metadata.verifications``)."""
        return Verifications(self._engine)

    @property
    def left_out(self) -> LeftOutTables:
        """The tables selections' patterns matched and left out, and why
        (``metadata.left_out``)."""
        return LeftOutTables(self._engine)
