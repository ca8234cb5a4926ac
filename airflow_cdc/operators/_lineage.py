"""OpenLineage for the operators: the lineage rule's values (:mod:`airflow_cdc.lineage`)
turned into the OpenLineage provider's ``OperatorLineage``.

The provider calls :meth:`LineageMixin.get_openlineage_facets_on_complete` after the task
(also after a failure), in a process it forks from the task's: so everything the facets
need that comes from an Airflow connection (the source's host and port, the lake's root,
the metadata DB's URL) is noted while the task runs (:meth:`LineageMixin.note_lineage`),
and the method itself reads no connection. OpenLineage is imported inside that method only:
without the provider installed nothing here imports it and the method is never called.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_cdc.lineage import TaskLineage, task_lineage
from airflow_cdc.model import TableId, TableSchema
from airflow_cdc.model.lake_columns import LakeColumnRules
from airflow_cdc.model.routes import NO_ROUTES, Routes
from airflow_cdc.operators._base import LakeRowsOperator

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

    from airflow_cdc.config import SinkConfig, SourceConfig
    from airflow_cdc.lineage import LineageDataset
    from airflow_cdc.metadata import MetadataStore

__all__ = [
    "LineageMixin",
    "LineageScope",
    "as_operator_lineage",
    "recorded_schemas",
    "with_recorded_schemas",
]


@dataclass(frozen=True)
class LineageScope:
    """What a task ran on, noted while it ran: the source's address (no credentials), the
    lake's root, and its tables (with their schemas where the task loaded them)."""

    host: str
    port: int
    sink_root: str
    tables: tuple[TableId | TableSchema, ...] = ()
    #: Where to read the schemas the task did not load (the schema history); secret.
    metadata_url: str = field(default="", repr=False)
    #: What of the tables' columns their Delta tables hold (None: every column).
    lake_rules: LakeColumnRules | None = None
    #: Which Delta table each table's rows go to.
    routes: Routes = NO_ROUTES


def _lake_schema(rules: LakeColumnRules, schema: TableSchema) -> TableSchema:
    """``schema`` as its Delta table holds it; as it is where the rules do not apply (the
    task itself refused it then)."""
    try:
        return rules.for_table(schema).project(schema)
    except ValueError:
        return schema


class LineageMixin:
    """``get_openlineage_facets_on_complete`` for an operator that notes its scope."""

    _lineage_scope: LineageScope | None = None

    def note_lineage(
        self,
        source: SourceConfig,
        sink: SinkConfig,
        tables: Sequence[TableId | TableSchema] = (),
        *,
        metadata_url: str = "",
    ) -> None:
        """Note what this task runs on, for the lineage reported when it ends."""
        rules = self.lake_rules() if isinstance(self, LakeRowsOperator) else None
        self._lineage_scope = LineageScope(
            source.host, source.port, sink.root, tuple(tables), metadata_url, rules, sink.routing
        )

    def lineage_tables(self, scope: LineageScope) -> Sequence[TableId | TableSchema]:
        """The tables the task ran on; those without a schema get the newest the schema
        history holds (an operator that knows its tables only through the metadata DB
        overrides this)."""
        return with_recorded_schemas(scope.tables, scope.metadata_url)

    def task_lineage(self) -> TaskLineage:
        """The datasets this task read and wrote (none when it noted no scope)."""
        scope = self._lineage_scope
        if scope is None:
            return TaskLineage()
        tables, rules = self.lineage_tables(scope), scope.lake_rules
        lake = None if rules is None else (lambda schema: _lake_schema(rules, schema))
        routes = scope.routes
        return task_lineage(
            scope.host, scope.port, scope.sink_root, tables, lake, routes.lake_table
        )

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage[Any, Any]:
        """Called by the OpenLineage provider (when installed) after the task ran."""
        return as_operator_lineage(self.task_lineage())


def with_recorded_schemas(
    tables: Sequence[TableId | TableSchema], metadata_url: str
) -> list[TableId | TableSchema]:
    """``tables``, each bare name replaced by its newest schema in the schema history
    (recorded by the chunks and the stream); a table it has none of stays a name."""
    if not metadata_url or all(isinstance(t, TableSchema) for t in tables):
        return list(tables)
    # Imported when the lineage is asked for, not at every DAG parse.
    from airflow_cdc.metadata import MetadataStore

    with MetadataStore.connect(metadata_url, migrate=False) as store:
        return recorded_schemas(store, tables)


def recorded_schemas(
    store: MetadataStore, tables: Sequence[TableId | TableSchema]
) -> list[TableId | TableSchema]:
    """:func:`with_recorded_schemas` on an open metadata store."""
    bare = [t for t in tables if isinstance(t, TableId)]
    history = store.schema_history.read(bare) if bare else {}
    newest = {table: entries[-1][1] for table, entries in history.items() if entries}
    return [newest.get(t, t) if isinstance(t, TableId) else t for t in tables]


def as_operator_lineage(lineage: TaskLineage) -> OperatorLineage[Any, Any]:
    """``lineage`` as the OpenLineage provider's ``OperatorLineage`` (imports OpenLineage)."""
    from airflow.providers.openlineage.extractors import OperatorLineage

    return OperatorLineage(
        inputs=[_dataset(d) for d in lineage.inputs],
        outputs=[_dataset(d) for d in lineage.outputs],
    )


def _dataset(dataset: LineageDataset) -> Any:
    from airflow.providers.common.compat.openlineage.facet import (
        Dataset,
        SchemaDatasetFacet,
        SchemaDatasetFacetFields,
    )

    facets: dict[str, Any] = {}
    if dataset.fields:
        fields = [SchemaDatasetFacetFields(name=f.name, type=f.type) for f in dataset.fields]
        facets["schema"] = SchemaDatasetFacet(fields=fields)
    return Dataset(namespace=dataset.namespace, name=dataset.name, facets=facets)
