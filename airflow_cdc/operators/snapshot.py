"""Run one work unit of a snapshot plan (one chunk, or several small tables' chunks) as a
Spark application.

Secrets reach the Spark job through a job file, never through ``argv``: ``ps`` on any host
shows the command line, and Airflow logs it. The file is written to a private temporary
folder (mode 0700, file 0600) just before ``spark-submit`` starts and removed when the task
ends, fails or is killed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from airflow_cdc.config import AirflowTask, ChunkJobSpec, ReadConfig
from airflow_cdc.errors import ConfigurationError
from airflow_cdc.hooks import CdcMetadataHook, CdcSourceHook
from airflow_cdc.operators._base import LakeRowsOperator
from airflow_cdc.operators._job_file import JobFileSparkOperator
from airflow_cdc.operators._lineage import LineageMixin, LineageScope, recorded_schemas
from airflow_cdc.rendered import as_positive_int
from airflow_cdc.spark.environment import JOB_JVM_CONF

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_cdc.model import TableId, TableSchema

__all__ = [
    "DEFAULT_SPARK_CONF",
    "SNAPSHOT_CHUNK_APPLICATION",
    "UNIT_MAP_INDEX_TEMPLATE",
    "SnapshotChunkOperator",
]

#: The entry script, ``spark_jobs/snapshot_chunk.py``, which the wheel ships inside the
#: package so the path exists wherever airflow-cdc is installed.
SNAPSHOT_CHUNK_APPLICATION = str(
    Path(__file__).resolve().parents[1] / "spark_jobs" / "snapshot_chunk.py"
)

#: One chunk is a small job: no UI port per concurrent task, few shuffle partitions.
DEFAULT_SPARK_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    **JOB_JVM_CONF,
}

#: The UI label of a mapped task: ``shop.orders #3 [100, 200)`` for a unit of one chunk,
#: ``shop: 41 tables, t001..t041`` for small tables together. ``task`` in the template
#: context is the unmapped operator of that map index (task_runner puts ``ti.task`` there),
#: so its ``unit`` attribute is that index's XCom item.
UNIT_MAP_INDEX_TEMPLATE = "{{ task.unit['label'] }}"


class SnapshotChunkOperator(LineageMixin, LakeRowsOperator, JobFileSparkOperator):
    """``spark-submit`` of one work unit of a snapshot plan: its chunks, each with its own
    watermarks and record (``snapshot.unit``). Clearing the task re-runs exactly them.

    Map it over the plan: ``SnapshotChunkOperator.partial(task_id=..., sink_path=...)
    .expand(unit=plan.output)``.

    :param unit: one item of :class:`PlanSnapshotOperator`'s XCom (``chunk_ids``,
        ``label``...); a unit without chunks (a start without a snapshot) submits nothing.
    ``sink_path``, ``staging_path``, ``columns``, ``masks`` and the connection ids are
    :class:`~airflow_cdc.operators._base.LakeRowsOperator`'s.
    :param partition_rows: a chunk larger than this is read as several partitions in
        parallel (default: ``ReadConfig``'s). Templated.
    :param read_engine: ``"connectorx"`` (default) or ``"pymysql"``.
    :param application: entry script; default :data:`SNAPSHOT_CHUNK_APPLICATION`.
    :param spark_binary: default: the ``spark-submit`` of the installed pyspark.
    :param env_vars: merged over the variables that make that ``spark-submit`` work
        (SPARK_HOME, PYSPARK_PYTHON, ...), which are computed when the task runs.
    :param conf: merged over :data:`DEFAULT_SPARK_CONF`.

    Every other argument goes to :class:`SparkSubmitOperator` (``conn_id`` is the Spark
    connection, default ``spark_default``). ``application_args`` is set by the operator.

    Lineage (OpenLineage, when its provider is installed): the unit's tables as inputs and
    their Delta tables as outputs, with the schemas the chunks recorded.
    """

    template_fields: Sequence[str] = (
        *SparkSubmitOperator.template_fields,
        *LakeRowsOperator.template_fields,
        "partition_rows",
    )
    ui_color = "#fde8d7"
    default_application = SNAPSHOT_CHUNK_APPLICATION
    default_conf = DEFAULT_SPARK_CONF
    default_name = "airflow-cdc-chunk"

    def __init__(
        self,
        *,
        unit: dict[str, Any],
        partition_rows: int | str | None = None,
        read_engine: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("map_index_template", UNIT_MAP_INDEX_TEMPLATE)
        super().__init__(**kwargs)
        self.unit = unit
        self.partition_rows = partition_rows
        self.read_engine = read_engine
        #: The task instance running (recorded with the chunks' attempts), once executing.
        self._airflow_task = AirflowTask()

    def execute(self, context: Context) -> None:
        if isinstance(self.unit, dict) and self.unit.get("chunk_ids") == []:
            self.log.info("%s: nothing to snapshot", self.unit.get("label", "this unit"))
            return
        ti = context.get("ti")
        if ti is not None:
            map_index = getattr(ti, "map_index", None)
            self._airflow_task = AirflowTask(
                ti.dag_id, ti.run_id, ti.task_id, -1 if map_index is None else int(map_index)
            )
        super().execute(context)

    # -- the job file ----------------------------------------------------------------
    def chunk_ids(self) -> tuple[int, ...]:
        """The unit's chunk ids from the XCom item, checked (a wrong mapping fails clearly)."""
        value = self.unit.get("chunk_ids") if isinstance(self.unit, dict) else None
        if (
            not isinstance(value, list | tuple)
            or not value
            or any(isinstance(i, bool) or not isinstance(i, int) for i in value)
        ):
            raise ConfigurationError(
                "unit must be an item of the plan task's XCom with a non-empty list of "
                f"integer 'chunk_ids', got {self.unit!r}"
            )
        return tuple(value)

    def build_spec(self) -> ChunkJobSpec:
        """The job spec, with the secrets resolved from the Airflow connections."""
        read_kwargs: dict[str, Any] = {}
        if self.partition_rows is not None and self.partition_rows != "":
            read_kwargs["partition_rows"] = as_positive_int("partition_rows", self.partition_rows)
        if self.read_engine:
            read_kwargs["engine"] = self.read_engine
        return ChunkJobSpec(
            chunk_ids=self.chunk_ids(),
            source=CdcSourceHook(self.source_conn_id).source_config(),
            metadata_url=CdcMetadataHook(self.metadata_conn_id).metadata_url(),
            sink=self.lake(),
            read=ReadConfig(**read_kwargs),
            lake_columns=self.lake_columns(),
            airflow_task=self._airflow_task,
        )

    def prepare_submit(self) -> Path:
        """Write the job file and point the submission at it (separate from :meth:`execute`
        so a test can inspect the command the hook builds)."""
        spec = self.build_spec()
        self.note_lineage(spec.source, spec.sink, metadata_url=spec.metadata_url)
        path = self._submit_job_file(
            spec, prefix="airflow-cdc-job-", filename=f"chunks-{spec.chunk_ids[0]}.json"
        )
        label = str(self.unit.get("label", "?"))
        if self._auto_name:
            self.name = f"airflow-cdc {label}"
        self.log.info(
            "%s: %d chunk(s) (ids %s); job file %s",
            label,
            len(spec.chunk_ids),
            _ids_text(spec.chunk_ids),
            path,
        )
        return path

    def lineage_tables(self, scope: LineageScope) -> list[TableId | TableSchema]:
        """The unit's tables, which only the plan in the metadata DB names."""
        # Imported when the lineage is asked for, not at every DAG parse.
        from airflow_cdc.metadata import MetadataStore

        ids = set(self.chunk_ids())
        with MetadataStore.connect(scope.metadata_url, migrate=False) as store:
            plan_id = self.unit.get("plan_id")
            if isinstance(plan_id, int):
                chunks = [c for c in store.plans.get(plan_id).chunks if c.chunk_id in ids]
            else:
                chunks = [store.chunks.get(chunk_id) for chunk_id in sorted(ids)]
            return recorded_schemas(store, list(dict.fromkeys(chunk.table for chunk in chunks)))

    def on_kill(self) -> None:
        try:
            super().on_kill()
        finally:
            self._cleanup()


def _ids_text(ids: Sequence[int]) -> str:
    return ", ".join(map(str, ids)) if len(ids) <= 5 else f"{ids[0]}..{ids[-1]}"
