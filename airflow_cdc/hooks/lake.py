"""The lake's connection (``cdc_lake``) as delta-rs storage options.

A local lake needs no connection. For an object store, ``cdc_lake`` holds the credentials
and endpoint (conn type ``aws`` as the Amazon provider spells it, ``wasb``/``adls`` or
``google_cloud_platform``; see :mod:`airflow_cdc.sinks.storage.connection`). Without the
connection, the store's default credentials apply (environment, instance role), which the
write check then tries. The options are secret: they reach the Spark jobs only inside the
0600 job file, never in argv, XCom or a log line.
"""

from __future__ import annotations

from typing import Any, ClassVar

from airflow.sdk.exceptions import AirflowNotFoundException

from airflow_cdc.connection_ids import LAKE_CONN_ID
from airflow_cdc.hooks._base import CdcHook

__all__ = ["CdcLakeHook"]


class CdcLakeHook(CdcHook):
    """Reads the lake connection into storage options (``{}`` when it is not defined)."""

    default_conn_name: ClassVar[str] = LAKE_CONN_ID
    conn_type: ClassVar[str] = "aws"
    hook_name: ClassVar[str] = "CDC lake (S3, ABFS, GCS)"

    def get_conn(self) -> dict[str, str]:
        return self.storage_options()

    def defined(self) -> bool:
        try:
            self.get_connection(self.conn_id)
        except AirflowNotFoundException:
            return False
        return True

    def storage_options(self) -> dict[str, str]:
        """delta-rs storage options from the connection; ``{}`` when it is not defined."""
        # Imported when the task runs, not at every DAG parse.
        from airflow_cdc.sinks.storage.connection import storage_options_from_connection

        try:
            conn = self.get_connection(self.conn_id)
        except AirflowNotFoundException:
            return {}
        extra: dict[str, Any] = conn.extra_dejson
        options = storage_options_from_connection(
            self.conn_id, conn.conn_type or "", conn.login, conn.password, extra
        )
        # Names only: the values hold the secret.
        self.log.info(
            "Lake storage options from connection %r: %s", self.conn_id, ", ".join(sorted(options))
        )
        return options
