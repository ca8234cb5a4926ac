"""What the chunk and stream operators share: submitting a Spark job whose only argument is
a private job file (mode 0600 in a 0700 folder, removed afterwards), so no secret is on a
command line.

Only the Spark provider's public face is used: its constructor's arguments and the
attributes it keeps public (``application_args``, ``env_vars``, ``name``...). The binary
and the Spark connection id it keeps private, so they are kept here as well, as given.
"""

from __future__ import annotations

import os
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
from airflow_cdc.connection_ids import SPARK_CONN_ID
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

    :param spark_binary: the ``spark-submit`` to run; default: the Spark connection's
        (extra ``spark-binary``), else the installed pyspark's.
    :param conn_id: the Spark connection (the master, deploy mode...).
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
        spark_binary: str | None = None,
        conn_id: str = SPARK_CONN_ID,
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
            spark_binary=spark_binary,
            conn_id=conn_id,
            **kwargs,
        )
        self.spark_binary = spark_binary
        self.spark_conn_id = conn_id
        # An unnamed job gets a name from its rendered values when it is submitted.
        self._auto_name = name is None
        self._job_dir: str | None = None

    def prepare_submit(self) -> Path:
        raise NotImplementedError

    def _submit_job_file(self, spec: JobFile, *, prefix: str, filename: str) -> Path:
        """Write ``spec`` and point ``application_args`` and ``env_vars`` at it (the
        parent builds its hook from them when it executes)."""
        self._cleanup()
        self._job_dir = tempfile.mkdtemp(prefix=prefix)  # mode 0700
        path = spec.write(Path(self._job_dir) / filename)
        self.application_args = ["--job-file", str(path)]
        self.env_vars = {**self.submit_environment(), **(self.env_vars or {})}
        return path

    def job_file(self) -> Path | None:
        """The job file of the submission under way, if any."""
        if self._job_dir is None or not self.application_args:
            return None
        return Path(str(self.application_args[-1]))

    def submit_environment(self) -> dict[str, str]:
        """What makes ``spark-submit`` run the installed pyspark with this Python, resolved
        when the task runs (the worker's Python), not when the DAG is parsed.

        Unless a binary is named (``spark_binary``, or the connection's ``spark-binary``),
        the provider runs ``spark-submit`` found on the PATH it is given: the installed
        pyspark's ``bin`` goes first on it."""
        env = spark_environment()
        if not self.spark_binary and not self._connection_names_binary():
            bin_dir = str(Path(spark_submit_binary()).parent)
            env["PATH"] = os.pathsep.join(p for p in (bin_dir, os.environ.get("PATH")) if p)
        return env

    def _connection_names_binary(self) -> bool:
        """Whether the Spark connection chooses the binary (extra ``spark-binary``): then the
        cluster's ``spark-submit`` on PATH is meant, not the one of the local pyspark."""
        try:
            extra = BaseHook.get_connection(self.spark_conn_id).extra_dejson
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
