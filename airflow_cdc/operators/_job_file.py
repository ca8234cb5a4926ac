"""What the chunk and stream operators share: submitting a Spark job whose only argument is
a private job file (mode 0600 in a 0700 folder, removed afterwards), so no secret is on a
command line."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from airflow_cdc import errors
from airflow_cdc.config import JobFile
from airflow_cdc.errors import CdcError, ConfigurationError
from airflow_cdc.spark.environment import spark_environment, spark_submit_binary

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["JobFileSparkOperator", "job_failure"]


def job_failure(job_file: Path) -> CdcError | None:
    """The error a job left next to its job file (``spark._entry.report_failure``), as the
    same airflow-cdc error class, or None."""
    try:
        text = JobFile.failure_path(job_file).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    name, _, message = text.partition(": ")
    kind = getattr(errors, name, None)
    if isinstance(kind, type) and issubclass(kind, CdcError):
        return kind(message)
    return CdcError(text)


class JobFileSparkOperator(SparkSubmitOperator):
    """A ``SparkSubmitOperator`` whose ``application_args`` are ``--job-file PATH``.

    Subclasses implement :meth:`prepare_submit` with :meth:`_submit_job_file`.
    """

    #: Set by each subclass: its entry script, Spark conf and application name by default.
    default_application: ClassVar[str]
    default_conf: ClassVar[Mapping[str, str]]
    default_name: ClassVar[str]

    def __init__(
        self,
        *,
        application: str | None = None,
        conf: dict[str, Any] | None = None,
        name: str | None = None,
        **kwargs: Any,
    ) -> None:
        if "application_args" in kwargs:
            raise ConfigurationError(
                f"{type(self).__name__} sets application_args itself (--job-file PATH); do not pass them"
            )
        super().__init__(
            application=application or self.default_application,
            conf={**self.default_conf, **(conf or {})},
            name=name or self.default_name,
            **kwargs,
        )
        # An unnamed job gets a name from its rendered values when it is submitted.
        self._auto_name = name is None
        self._job_dir: str | None = None

    def prepare_submit(self) -> Path:
        raise NotImplementedError

    def _submit_job_file(self, spec: JobFile, *, prefix: str, filename: str) -> Path:
        """Write ``spec`` and point ``application_args``, binary and env at it."""
        self._cleanup()
        self._job_dir = tempfile.mkdtemp(prefix=prefix)  # mode 0700
        path = spec.write(Path(self._job_dir) / filename)
        self.application_args = ["--job-file", str(path)]
        # Resolved when the task runs (the worker's Python), not when the DAG is parsed.
        if not self._spark_binary and not self._connection_names_binary():
            self._spark_binary = spark_submit_binary()
        self.env_vars = {**spark_environment(), **(self.env_vars or {})}
        self._hook = None  # built by the parent from the fields above
        return path

    def _connection_names_binary(self) -> bool:
        """Whether the Spark connection chooses the binary (extra ``spark-binary``): then the
        cluster's ``spark-submit`` on PATH is meant, not the one of the local pyspark."""
        try:
            extra = BaseHook.get_connection(self._conn_id).extra_dejson
        except AirflowNotFoundException:
            return False
        return bool(extra.get("spark-binary"))

    def execute(self, context: Context) -> None:
        try:
            job_file = self.prepare_submit()
            try:
                super().execute(context)
            except Exception as exc:
                reported = job_failure(job_file)
                if reported is None:
                    raise
                # The job's own error ("stream is already running: stop it first", "the
                # start position is purged: re-snapshot"), not "exit code 2".
                raise reported from exc
        finally:
            self._cleanup()

    def _cleanup(self) -> None:
        if self._job_dir is not None:
            shutil.rmtree(self._job_dir, ignore_errors=True)
            self._job_dir = None
