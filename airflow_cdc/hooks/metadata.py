"""The metadata DB's connection (``cdc_metadata``) as a SQLAlchemy URL.

Why not ``Connection.get_uri()``: Airflow splits a URI into host/schema/... and rebuilds it
with every ``/`` of the path percent-encoded (``sqlite:////var/x.db`` comes back as
``sqlite:///%2Fvar%2Fx.db``) and with ``postgresql`` renamed ``postgres``, which SQLAlchemy 2
rejects. The URL is therefore rebuilt here from the parts, per dialect.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlencode

from airflow.sdk.exceptions import AirflowNotFoundException

from airflow_cdc.connection_ids import METADATA_CONN_ID, METADATA_CONN_TYPE
from airflow_cdc.errors import ConfigurationError
from airflow_cdc.hooks._base import CdcHook

if TYPE_CHECKING:
    from airflow.sdk import Connection

__all__ = ["CdcMetadataHook", "default_metadata_url", "safe_url", "url_from_parts"]

#: Airflow connection types -> SQLAlchemy drivers that are installed with airflow-cdc.
_DIALECTS = {
    "postgres": "postgresql",
    "postgresql": "postgresql",
    "mysql": "mysql+pymysql",
    "mariadb": "mariadb+pymysql",
}


def default_metadata_url() -> str:
    """The embedded default: a SQLite file in ``$AIRFLOW_HOME`` (like Airflow's own default)."""
    home = os.path.expanduser(os.environ.get("AIRFLOW_HOME", "~/airflow"))
    return f"sqlite:///{os.path.abspath(os.path.join(home, 'cdc_metadata.db'))}"


def url_from_parts(
    *,
    conn_type: str,
    host: str | None,
    port: int | None,
    login: str | None,
    password: str | None,
    schema: str | None,
    query: dict[str, Any],
) -> str:
    """A SQLAlchemy URL string from the parts of an Airflow connection."""
    from sqlalchemy.engine import URL

    conn_type = conn_type.lower()
    if conn_type == "sqlite":
        # ``sqlite:////abs/path`` parses to schema '/abs/path'; ``sqlite:///rel`` to 'rel'.
        path = schema or host or ":memory:"
        suffix = ("?" + urlencode({str(k): str(v) for k, v in query.items()})) if query else ""
        return f"sqlite:///{path}{suffix}"
    drivername = _DIALECTS.get(conn_type, conn_type)
    url = URL.create(
        drivername,
        username=login or None,
        password=password or None,
        host=host or None,
        port=port or None,
        database=schema or None,
        query={str(k): str(v) for k, v in query.items()},
    )
    return url.render_as_string(hide_password=False)


class CdcMetadataHook(CdcHook):
    """Gives the metadata DB URL.

    The connection is written as the SQLAlchemy URL itself, e.g.
    ``AIRFLOW_CONN_CDC_METADATA='sqlite:////var/lib/cdc/meta.db'`` or
    ``'postgresql://user:password@host:5432/cdc'``; or any type with the full URL in the
    extra ``{"url": "..."}`` (an escape hatch for dialects this module does not know).
    Without the connection the default is ``sqlite:///$AIRFLOW_HOME/cdc_metadata.db``.
    """

    default_conn_name: ClassVar[str] = METADATA_CONN_ID
    conn_type: ClassVar[str] = METADATA_CONN_TYPE
    hook_name: ClassVar[str] = "CDC metadata DB (SQLAlchemy URL)"

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": [],
            "relabeling": {"schema": "Database"},
            "placeholders": {"extra": '{"url": "postgresql://user:password@host:5432/cdc"}'},
        }

    def get_conn(self) -> str:
        return self.metadata_url()

    def metadata_url(self) -> str:
        """The SQLAlchemy URL (with the password: never log it, use :meth:`safe_url`)."""
        try:
            conn = self.get_connection(self.conn_id)
        except AirflowNotFoundException:
            return self._default_url()
        return self._url_of(conn)

    async def ametadata_url(self) -> str:
        """:meth:`metadata_url` for a trigger (Airflow's async connection lookup)."""
        try:
            conn = await self.aget_connection(self.conn_id)
        except AirflowNotFoundException:
            return self._default_url()
        return self._url_of(conn)

    def _default_url(self) -> str:
        url = default_metadata_url()
        _log_once(
            self,
            "Airflow connection %r is not defined: using the embedded metadata DB %s "
            "(set AIRFLOW_CONN_%s to a SQLAlchemy URL to use another)",
            self.conn_id,
            url,
            self.conn_id.upper(),
        )
        return url

    def _url_of(self, conn: Connection) -> str:
        extra = dict(conn.extra_dejson)
        explicit = extra.pop("url", None)
        if explicit:
            url = str(explicit)
        elif not conn.conn_type or conn.conn_type == self.conn_type:
            raise ConfigurationError(
                f"connection {self.conn_id!r} of type {conn.conn_type!r} has no 'url' extra: "
                "write it as a SQLAlchemy URL (e.g. sqlite:////path/meta.db) or set extra "
                '{"url": "..."}'
            )
        else:
            url = url_from_parts(
                conn_type=conn.conn_type,
                host=conn.host,
                port=conn.port,
                login=conn.login,
                password=conn.password,
                schema=conn.schema,
                query=extra,
            )
        _log_once(self, "CDC metadata DB from connection %r: %s", self.conn_id, safe_url(url))
        return url


#: The lines :func:`_log_once` wrote in this process: the CDC page reads the URL at every
#: refresh, and a task's log needs it once.
_LOGGED: set[tuple[object, ...]] = set()


def _log_once(hook: CdcMetadataHook, message: str, *args: object) -> None:
    """``message`` at INFO the first time this process writes it, at DEBUG after."""
    line = (message, *args)
    hook.log.log(logging.DEBUG if line in _LOGGED else logging.INFO, message, *args)
    _LOGGED.add(line)


def safe_url(url: str) -> str:
    """``url`` with any password replaced by ``***``."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparsable URL>"
