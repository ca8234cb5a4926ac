"""The params the operators share, each declared once, keyword-only (as the Airflow providers'
base operators declare their connection ids): the connections, the lake, what of the
source's columns it holds, the tables.

Each layer is a ``BaseOperator`` whose ``__init__`` passes the rest on with ``super()``, so
an operator on ``SparkSubmitOperator`` takes them too (``class StreamOperator(
SelectedTablesOperator, JobFileSparkOperator)``), and Airflow knows their names when a
mapped task is checked (``.partial(sink_path=...)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from airflow.sdk import BaseOperator

from airflow_cdc.config import LakeColumnsConfig, SinkConfig
from airflow_cdc.hooks import CdcLakeHook, CdcMaskHook, CdcMetadataHook, CdcSourceHook
from airflow_cdc.model import TableSelection
from airflow_cdc.model.lake_columns import LakeColumnRules
from airflow_cdc.operators._params import lake_columns, lake_rules, lake_sink, table_selection

__all__ = ["CdcBaseOperator", "LakeOperator", "LakeRowsOperator", "SelectedTablesOperator"]


class CdcBaseOperator(BaseOperator):
    """The Airflow connections of airflow-cdc, by default the hooks' own.

    :param source_conn_id: the MySQL/MariaDB server (:class:`~airflow_cdc.hooks.CdcSourceHook`).
    :param metadata_conn_id: the metadata DB (:class:`~airflow_cdc.hooks.CdcMetadataHook`).
    :param lake_conn_id: the lake's object store (:class:`~airflow_cdc.hooks.CdcLakeHook`);
        not needed for a local lake. Its secret reaches a Spark job only in the job file.

    An operator that does not reach one of them ignores its id.
    """

    def __init__(
        self,
        *,
        source_conn_id: str = CdcSourceHook.default_conn_name,
        metadata_conn_id: str = CdcMetadataHook.default_conn_name,
        lake_conn_id: str = CdcLakeHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.source_conn_id = source_conn_id
        self.metadata_conn_id = metadata_conn_id
        self.lake_conn_id = lake_conn_id


class LakeOperator(CdcBaseOperator):
    """An operator on the Delta tables: the connections and where the tables live.

    :param sink_path: root folder/URI of the Delta tables (``<root>/<database>/<table>``).
        Templated.
    :param staging_path: where Spark jobs' executors stage files for the driver (default
        ``<sink_path>/_cdc_staging``, in the lake's store). Templated.
    :param routes: ``{"<table pattern>": "<database>.<table>"}``: the source tables a
        pattern matches are written into that one Delta table (``model.routes``; every
        task of a pipeline must be given the same). Templated; a rendered JSON/dict string
        is accepted.
    :param routes_unique_keys: the routed tables' keys are unique across each route's
        tables (the key is not widened by ``_cdc_source_table``). Templated.
    """

    template_fields: Sequence[str] = ("sink_path", "staging_path", "routes", "routes_unique_keys")
    template_fields_renderers: ClassVar[dict[str, str]] = {"routes": "json"}

    def __init__(
        self,
        *,
        sink_path: str,
        staging_path: str | None = None,
        routes: dict[str, str] | str | None = None,
        routes_unique_keys: bool | str = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.sink_path = sink_path
        self.staging_path = staging_path
        self.routes = routes
        self.routes_unique_keys = routes_unique_keys

    def lake(self, *, check: bool = False) -> SinkConfig:
        """The rendered ``sink_path`` and ``staging_path`` with the lake connection's storage
        options; with ``check``, refused unless both take a write (``_params.lake_sink``)."""
        return lake_sink(
            self.sink_path,
            lake_conn_id=self.lake_conn_id,
            staging_path=self.staging_path,
            routes=(self.routes, self.routes_unique_keys),
            check=check,
        )


class LakeRowsOperator(LakeOperator):
    """An operator that writes the source's rows into the lake or compares them: what of
    the source's columns reaches the lake, and how (every such task of a pipeline must be
    given the same; the shipped DAGs take them from the DAG params ``columns``, ``masks``
    and ``change_metadata``, by default ``[cdc] columns``, ``masks`` and
    ``change_metadata``).

    :param columns: ``{"<table pattern>": {"include": [...]}}`` or ``{"exclude": [...]}``:
        the columns that reach the lake (``model.lake_columns``; never a key column).
        Templated; a rendered JSON/dict string is accepted.
    :param masks: ``{"<table pattern>.<column>": "null" | "truncate:<n>" | "hash"}``: how a
        column reaches the lake (a key column: ``hash`` only, which keeps each row's
        identity). Templated, like ``columns``.
    :param mask_conn_id: the connection whose password is the key of ``hash`` masks (read
        only when one is set; it reaches a Spark job only in the job file).
    :param change_metadata: the Delta tables (of source tables with a key) get
        ``_cdc_op`` and ``_cdc_commit_ts`` (added to a table made without them). Templated.
    """

    template_fields: Sequence[str] = (
        *LakeOperator.template_fields,
        "columns",
        "masks",
        "change_metadata",
    )
    template_fields_renderers: ClassVar[dict[str, str]] = {
        **LakeOperator.template_fields_renderers,
        "columns": "json",
        "masks": "json",
    }

    def __init__(
        self,
        *,
        columns: dict[str, Any] | str | None = None,
        masks: dict[str, str] | str | None = None,
        mask_conn_id: str = CdcMaskHook.default_conn_name,
        change_metadata: bool | str = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.columns = columns
        self.masks = masks
        self.mask_conn_id = mask_conn_id
        self.change_metadata = change_metadata

    def lake_columns(self) -> LakeColumnsConfig:
        """The rendered ``columns``, ``masks`` and ``change_metadata``, with the mask key
        when a mask hashes."""
        return lake_columns(
            self.columns,
            self.masks,
            mask_conn_id=self.mask_conn_id,
            change_metadata=self.change_metadata,
        )

    def lake_rules(self) -> LakeColumnRules:
        """The rendered ``columns`` and ``masks``, parsed (without the key)."""
        return lake_rules(self.columns, self.masks)


class SelectedTablesOperator(LakeRowsOperator):
    """An operator on a selection of the source's tables, and their Delta tables.

    :param tables: tables and patterns (``model.selection``): ``shop.orders``, globs such as
        ``shop.*`` or ``shop.order_*``, or ``re:<regular expression>`` over
        ``database.table``; a name with a dot or glob character is quoted with backticks.
        Templated; a rendered string (JSON list, Python list or comma-separated) is accepted.
    :param exclude_tables: tables and patterns left out of ``tables``' matches. Templated.
    """

    template_fields: Sequence[str] = (
        "tables",
        "exclude_tables",
        *LakeRowsOperator.template_fields,
    )
    template_fields_renderers: ClassVar[dict[str, str]] = {
        **LakeRowsOperator.template_fields_renderers,
        "tables": "json",
        "exclude_tables": "json",
    }

    def __init__(
        self,
        *,
        tables: list[str] | str,
        exclude_tables: list[str] | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.tables = tables
        self.exclude_tables = exclude_tables

    def selection(self) -> TableSelection:
        """The rendered ``tables`` and ``exclude_tables``, parsed."""
        return table_selection(self.tables, self.exclude_tables)
