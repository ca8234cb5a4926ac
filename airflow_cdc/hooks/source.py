"""The source server's connection (``cdc_source``) as a :class:`SourceConfig`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk.exceptions import AirflowNotFoundException

from airflow_cdc.connection_ids import SOURCE_CONN_ID, SOURCE_CONN_TYPE, conn_env_var
from airflow_cdc.errors import ConfigurationError
from airflow_cdc.hooks._base import CdcHook

if TYPE_CHECKING:
    # Imported when the task runs, not at every DAG parse.
    from airflow_cdc.config import SourceConfig

__all__ = ["CdcSourceHook"]

#: Connection types that describe a MySQL/MariaDB server. ``cdc_mysql`` is ours (registered by
#: the provider so the UI has a form without the MySQL provider); the others are what an
#: ``AIRFLOW_CONN_...='mysql://user:password@host:3306/'`` URI gives.
SOURCE_CONN_TYPES = frozenset({SOURCE_CONN_TYPE, "mysql", "mariadb", "mysql+pymysql"})


class CdcSourceHook(CdcHook):
    """Reads the MySQL/MariaDB connection: host, port, login, password.

    Optional extras: ``connect_timeout`` (seconds) and ``server_id_base`` (binlog readers
    take server ids from this base; it must not collide with real replicas).
    """

    default_conn_name: ClassVar[str] = SOURCE_CONN_ID
    conn_type: ClassVar[str] = SOURCE_CONN_TYPE
    hook_name: ClassVar[str] = "CDC source (MySQL/MariaDB)"

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Hide the fields the source does not use (tables come from the DAG, not the URI)."""
        return {
            "hidden_fields": ["schema"],
            "relabeling": {"login": "User"},
            "placeholders": {
                "port": "3306",
                "extra": '{"connect_timeout": 10, "server_id_base": 5400}',
            },
        }

    def get_conn(self) -> SourceConfig:
        return self.source_config()

    def source_config(self) -> SourceConfig:
        """The connection as a :class:`SourceConfig`; a clear error when it is missing or wrong."""
        from airflow_cdc.config import SourceConfig

        try:
            conn = self.get_connection(self.conn_id)
        except AirflowNotFoundException as exc:
            raise ConfigurationError(
                f"Airflow connection {self.conn_id!r} is not defined: create it (type mysql) "
                f"in the UI or set {conn_env_var(self.conn_id)}="
                "'mysql://user:password@host:3306/'"
            ) from exc
        conn_type = (conn.conn_type or "").lower()
        if conn_type and conn_type not in SOURCE_CONN_TYPES:
            raise ConfigurationError(
                f"Airflow connection {self.conn_id!r} has type {conn_type!r}; the CDC source "
                f"needs one of {sorted(SOURCE_CONN_TYPES)} (a MySQL or MariaDB server)"
            )
        extra = conn.extra_dejson
        kwargs: dict[str, Any] = {}
        for name in ("connect_timeout", "server_id_base"):
            if name in extra:
                try:
                    kwargs[name] = int(extra[name])
                except (TypeError, ValueError) as exc:
                    raise ConfigurationError(
                        f"extra {name!r} of connection {self.conn_id!r} must be a whole number, "
                        f"got {extra[name]!r}"
                    ) from exc
        config = SourceConfig(
            host=conn.host or "",
            port=int(conn.port or 3306),
            user=conn.login or "root",
            password=conn.password or "",
            **kwargs,
        )
        self.log.info(
            "CDC source from connection %r: %s@%s:%s",
            self.conn_id,
            config.user,
            config.host,
            config.port,
        )
        return config
