"""Run the binlog stream as a long-running Spark application.

Like :mod:`airflow_cdc.operators.snapshot`, secrets reach the Spark job only through a job
file (mode 0600 in a private 0700 folder) that is removed when the task ends, fails or is
killed; ``argv`` is ``--job-file PATH``.

Stopping: marking the task failed (or an ``execution_timeout``) calls :meth:`on_kill`, which
first asks the stream's Python driver to stop (SIGTERM: it should stop the query and release
its lease), waits up to ``stop_timeout_seconds`` for ``spark-submit`` to exit, then kills it
as :class:`SparkSubmitOperator` does (and, in cluster modes, the driver on the cluster), and
finally kills any process of the job still left, so no orphan keeps the lease alive.
A stream killed without a graceful stop loses nothing: it restarts from its Spark checkpoint
once its metadata lease has expired (see :mod:`airflow_cdc.metadata.stream`).

Retries are Airflow's: a retried task starts the job again, which resumes from the checkpoint.
In cluster deploy modes with driver tracking, the provider's ``durable`` (Airflow >= 3.3,
default on) makes a retry after a worker crash reconnect to the still-running driver instead
of submitting a second one.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowSkipException

from airflow_cdc.config import (
    ON_PURGED,
    STREAM_MODE,
    DiscoveryConfig,
    OnPurged,
    SchemaChangeConfig,
    StreamBounds,
    StreamJobSpec,
    StreamMode,
    choice,
)
from airflow_cdc.config.startup import STARTUP_MODE, StartupConfig, StartupMode
from airflow_cdc.errors import ConfigurationError
from airflow_cdc.hooks import CdcMetadataHook, CdcSourceHook
from airflow_cdc.metadata.codec import table_to_text
from airflow_cdc.model import TableId
from airflow_cdc.operators._base import SelectedTablesOperator
from airflow_cdc.operators._graceful_stop import kill_all, stop_gracefully, submit_process
from airflow_cdc.operators._job_file import JobFileSparkOperator
from airflow_cdc.operators._lineage import LineageMixin
from airflow_cdc.operators._params import check_sink, resolved_tables, table_selection
from airflow_cdc.rendered import as_config, as_str_list
from airflow_cdc.sinks.contract.naming import escape_segment
from airflow_cdc.spark.environment import JOB_JVM_CONF

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = [
    "DEFAULT_STREAM_CONF",
    "STREAM_APPLICATION",
    "STREAM_ID_PREFIX",
    "StreamOperator",
    "default_checkpoint_dir",
    "default_stream_id",
    "stream_table_names",
]

#: The entry script, ``spark_jobs/stream.py`` (shipped inside the package, as
#: :data:`~airflow_cdc.operators.snapshot.SNAPSHOT_CHUNK_APPLICATION`).
STREAM_APPLICATION = str(Path(__file__).resolve().parents[1] / "spark_jobs" / "stream.py")

#: Micro-batches are small; the Spark UI stays on (its Structured Streaming tab is the
#: stream's monitor; Spark takes the next free port when 4040 is busy).
DEFAULT_STREAM_CONF: dict[str, str] = {"spark.sql.shuffle.partitions": "4", **JOB_JVM_CONF}

#: Prefix of the default stream id (see :func:`default_stream_id`).
STREAM_ID_PREFIX = "mysql_cdc:"
#: The ``cdc_stream_state.stream_id`` column's width.
_MAX_STREAM_ID = 200
_CHECKPOINTS_FOLDER = "_cdc_checkpoints"


def stream_table_names(value: Any, exclude: Any = None) -> tuple[str, ...]:
    """The rendered ``tables`` (names and patterns) and ``exclude_tables`` in their
    canonical text: an exact name as the metadata DB writes it (backticks only where a
    name holds a dot or backtick), a pattern as given; without duplicates, in order."""
    selection = table_selection(value, exclude)
    _, excluded = selection.texts()
    names = [
        table_to_text(p.exact_table) if p.exact_table is not None else p.text
        for p in selection.include
    ]
    return tuple(dict.fromkeys([*names, *(f"!{text}" for text in excluded)]))


def default_stream_id(tables: Sequence[str], exclude: Sequence[str] = ()) -> str:
    """``mysql_cdc:`` + the first 12 hex digits of the SHA-256 of the sorted canonical
    table names and patterns (``!`` before an excluded one) joined by newlines.

    Deterministic: the same tables and patterns give the same id in any order, spelling
    (``shop.orders`` and ```shop`.`orders```) or run, so a re-run, retry or cleared task finds
    its lease, state and checkpoint again; another selection gives another stream. A
    pattern's id does not change as tables matching it come and go.
    """
    names = sorted(set(stream_table_names(list(tables), list(exclude) or None)))
    digest = hashlib.sha256("\n".join(names).encode("utf-8")).hexdigest()[:12]
    return f"{STREAM_ID_PREFIX}{digest}"


def default_checkpoint_dir(sink_path: str, stream_id: str) -> str:
    """A local folder of the driver (it runs in the task's process tree, client mode):
    ``<sink_path>/_cdc_checkpoints/<id>`` for a local lake, else
    ``<temp dir>/airflow-cdc/checkpoints/<id>`` (the id written as one path segment,
    characters outside ``[A-Za-z0-9_-]`` as ``~XX``). Losing it costs nothing: a stream
    without its checkpoint resumes from its committed position in the metadata DB."""
    # Heavy imports (pyarrow, SQLAlchemy, pymysql) stay in the functions: the DAG processor
    # imports this module at every parse, and only a running task needs them.
    from airflow_cdc.sinks.storage.storage import is_local_uri

    segment = escape_segment(stream_id)
    if is_local_uri(sink_path):
        return f"{sink_path.rstrip('/')}/{_CHECKPOINTS_FOLDER}/{segment}"
    return os.path.join(tempfile.gettempdir(), "airflow-cdc", "checkpoints", segment)


class StreamOperator(LineageMixin, SelectedTablesOperator, JobFileSparkOperator):
    """``spark-submit`` of the binlog stream of ``tables`` into the Delta tables.

    ``tables``, ``exclude_tables``, ``sink_path``, ``staging_path`` and the connection ids
    are :class:`~airflow_cdc.operators._base.SelectedTablesOperator`'s, as the plan task
    takes them; ``tables`` are resolved against the server's catalog when the task starts,
    and the lake is checked before the job starts.

    :param stream_mode: ``continuous`` (runs until stopped) or ``until_caught_up`` (stops at
        the binlog position the server had when the job started). Templated, checked after
        rendering.
    :param stream_id: names the stream (its lease, state and checkpoint). Templated; default
        :func:`default_stream_id` of the tables. One stream per set of tables: a second
        stream on any of the same tables is refused while the first holds its lease.
    :param checkpoint_dir: Spark checkpoint of the stream: a local folder of the driver, or
        a URI of a Hadoop filesystem the cluster has. Templated; default
        :func:`default_checkpoint_dir`. Without it (another worker, a wiped disk) the
        stream resumes from its committed position in the metadata DB.
    :param bounds: batch size, pace and memory bounds: a
        :class:`~airflow_cdc.config.StreamBounds`, or a mapping of some of its fields (each
        value may be a template; ``{"max_merge_rows": "{{ params.merge_rows }}"}``); the
        others keep their defaults. Templated.
    :param discovery: with patterns in ``tables``, how new matching tables are found and
        snapshotted (``discover_seconds``, ``chunk_rows``): a
        :class:`~airflow_cdc.config.DiscoveryConfig` or a mapping of those fields; its
        patterns are ``tables``'. Templated.
    :param schema_changes: what the stream does with the source's column changes
        (``dropped_columns``: ``keep`` or ``remove``): a
        :class:`~airflow_cdc.config.SchemaChangeConfig` or a mapping of its fields.
        Templated.
    :param on_purged: when the binlog the stream needs is no longer on the server:
        ``fail`` (stop with ``PositionPurgedError``) or ``resnapshot`` (snapshot the tables
        concerned again as replacements and go on: ``stream.purged``). Templated.
    :param startup_mode: the pipeline's ``startup_mode`` (``config.StartupConfig``): with
        ``snapshot_only`` the task is skipped (a one-off load ends with its snapshot); every
        other mode streams (from where the plan recorded the start). Templated.
    :param stop_timeout_seconds: on kill, how long the job may take to stop by itself before
        it is killed. Airflow's supervisor escalates to SIGKILL 5 s after its SIGTERM, so
        the default stays below that.
    :param application: entry script; default :data:`STREAM_APPLICATION`.
    :param spark_binary: default: the ``spark-submit`` of the installed pyspark.
    :param env_vars: merged over the variables that make that ``spark-submit`` work.
    :param conf: merged over :data:`DEFAULT_STREAM_CONF`.

    Every other argument goes to :class:`SparkSubmitOperator` (``conn_id`` is the Spark
    connection, default ``spark_default``; ``durable``, ``retries``...).
    ``application_args`` is set by the operator.

    Lineage (OpenLineage, when its provider is installed), reported when the stream ends:
    the tables it started with as inputs and their Delta tables as outputs, with the
    schemas the schema history holds (tables a pattern finds later are not in it).
    """

    template_fields: Sequence[str] = (
        *SparkSubmitOperator.template_fields,
        *SelectedTablesOperator.template_fields,
        "stream_mode",
        "stream_id",
        "checkpoint_dir",
        "bounds",
        "discovery",
        "schema_changes",
        "startup_mode",
        "on_purged",
    )
    template_fields_renderers: ClassVar[dict[str, str]] = {
        **SelectedTablesOperator.template_fields_renderers,
        "bounds": "json",
        "discovery": "json",
        "schema_changes": "json",
    }
    ui_color = "#e3f5e1"
    default_application = STREAM_APPLICATION
    default_conf = DEFAULT_STREAM_CONF
    default_name = "airflow-cdc-stream"

    def __init__(
        self,
        *,
        stream_mode: str = StreamJobSpec.mode,
        stream_id: str | None = None,
        checkpoint_dir: str | None = None,
        bounds: StreamBounds | Mapping[str, Any] | str | None = None,
        discovery: DiscoveryConfig | Mapping[str, Any] | str | None = None,
        schema_changes: SchemaChangeConfig | Mapping[str, Any] | str | None = None,
        startup_mode: str = StartupConfig.mode,
        on_purged: str = StreamJobSpec.on_purged,
        stop_timeout_seconds: float = 4.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.stream_mode = stream_mode
        self.stream_id = stream_id
        self.checkpoint_dir = checkpoint_dir
        self.bounds = bounds
        self.discovery = discovery
        self.schema_changes = schema_changes
        self.stop_timeout_seconds = stop_timeout_seconds
        self.startup_mode = startup_mode
        self.on_purged = on_purged
        # Literals (not templates) are checked when the DAG is parsed.
        if isinstance(stream_mode, str) and "{{" not in stream_mode:
            self.mode()
        if "{{" not in str(startup_mode):
            self.startup()

    def execute(self, context: Context) -> None:
        if not self.startup().streams:
            raise AirflowSkipException(
                "startup_mode is 'snapshot_only': the load ends with the snapshot, no stream"
            )
        super().execute(context)

    # -- rendered values -----------------------------------------------------------------
    def mode(self) -> StreamMode:
        return choice(STREAM_MODE, StreamMode, str(self.stream_mode or "").strip())

    def startup(self) -> StartupMode:
        """The rendered ``startup_mode``, checked (the plan used the rest of the startup)."""
        given = str(self.startup_mode or StartupConfig.mode).strip()
        return choice(STARTUP_MODE, StartupMode, given)

    def resolved_stream_id(self) -> str:
        stream_id = str(self.stream_id or "").strip() or default_stream_id(
            as_str_list("tables", self.tables),
            as_str_list("exclude_tables", self.exclude_tables or []),
        )
        if len(stream_id) > _MAX_STREAM_ID:
            raise ConfigurationError(
                f"stream_id is {len(stream_id)} characters long; at most {_MAX_STREAM_ID} fit"
            )
        return stream_id

    def build_spec(self) -> StreamJobSpec:
        """The job spec, with the secrets resolved from the Airflow connections."""
        mode = self.mode()
        selection = self.selection()
        sink = self.lake()
        stream_id = self.resolved_stream_id()
        source = CdcSourceHook(self.source_conn_id).source_config()
        metadata_url = CdcMetadataHook(self.metadata_conn_id).metadata_url()
        tables = resolved_tables(source, selection)
        if not selection.is_exact:
            tables = self._snapshotted(metadata_url, tables)
        checkpoint = str(self.checkpoint_dir or "").strip() or default_checkpoint_dir(
            sink.root, stream_id
        )
        discovery = as_config("discovery", DiscoveryConfig, self.discovery)
        if discovery.patterns or discovery.exclude_patterns:
            raise ConfigurationError(
                "discovery takes no patterns: they are the patterns of tables and exclude_tables"
            )
        if not selection.is_exact:
            patterns, excluded = selection.texts()
            discovery = replace(
                discovery, patterns=tuple(patterns), exclude_patterns=tuple(excluded)
            )
        return StreamJobSpec(
            stream_id=stream_id,
            tables=tables,
            source=source,
            metadata_url=metadata_url,
            sink=sink,
            checkpoint_dir=checkpoint,
            mode=mode,
            bounds=as_config("bounds", StreamBounds, self.bounds),
            discovery=discovery,
            schema_changes=as_config("schema_changes", SchemaChangeConfig, self.schema_changes),
            on_purged=choice(
                ON_PURGED, OnPurged, str(self.on_purged or StreamJobSpec.on_purged).strip()
            ),
            lake_columns=self.lake_columns(),
        )

    def _snapshotted(self, metadata_url: str, tables: Sequence[str]) -> tuple[str, ...]:
        """The pattern's tables whose full snapshot is done: the stream's own from its
        start. The others (created since the plan, or still being snapshotted) are left to
        the stream, which snapshots or asks for them as it finds them (``stream.discovery``)."""
        # Imported when the task runs, not at every DAG parse.
        from airflow_cdc.metadata import MetadataStore

        with MetadataStore.connect(metadata_url, migrate=False) as store:
            done = store.watermarks.full_snapshots_done([TableId.parse(t) for t in tables])
        ready = tuple(t for t in tables if TableId.parse(t) in done)
        later = [t for t in tables if t not in ready]
        if later:
            self.log.info(
                "%d table(s) match without a finished snapshot (%s): the stream snapshots "
                "them itself, or asks for them once their snapshot is done, and they join it",
                len(later),
                ", ".join(later[:20]) + (" ..." if len(later) > 20 else ""),
            )
        if not ready:
            raise ConfigurationError(
                f"no table that {', '.join(as_str_list('tables', self.tables))} selects has a "
                "finished snapshot: run the mysql_cdc DAG's snapshot (plan, snapshot_chunk) first"
            )
        return ready

    # -- submission ----------------------------------------------------------------------
    def prepare_submit(self) -> Path:
        """Write the job file and point the submission at it."""
        spec = self.build_spec()
        # A wrong bucket or key fails here, in seconds, not in the executors.
        check_sink(spec.sink, lake_conn_id=self.lake_conn_id)
        self.note_lineage(
            spec.source,
            spec.sink,
            [TableId.parse(t) for t in spec.tables],
            metadata_url=spec.metadata_url,
        )
        path = self._submit_job_file(spec, prefix="airflow-cdc-stream-", filename="stream.json")
        if self._auto_name:
            self.name = f"airflow-cdc stream {spec.stream_id}"
        self.log.info(
            "Stream %s (%s) of %s; checkpoint %s; job file %s",
            spec.stream_id,
            spec.mode,
            ", ".join(spec.tables),
            spec.checkpoint_dir,
            path,
        )
        return path

    # -- stopping ------------------------------------------------------------------------
    def on_kill(self) -> None:
        leftovers: list[Any] = []
        try:
            job_file = self.job_file()
            leftovers = stop_gracefully(
                None if job_file is None else submit_process(str(job_file)),
                application=str(self.application),
                timeout=self.stop_timeout_seconds,
                log=self.log,
            )
        finally:
            try:
                super().on_kill()
            finally:
                kill_all(leftovers)
                self._cleanup()
