"""How to reach the source server."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from airflow_cdc.connection_ids import SOURCE_CONN_ID
from airflow_cdc.errors import ConfigurationError

__all__ = ["SourceConfig"]


@dataclass(frozen=True)
class SourceConfig:
    """How to reach the MySQL/MariaDB server."""

    host: str
    port: int = 3306
    user: str = "root"
    password: str = field(default="", repr=False)
    connect_timeout: int = 10
    #: Binlog readers need a server id unique on the server; readers take ids from this base.
    server_id_base: int = 5400

    def __post_init__(self) -> None:
        if not self.host:
            raise ConfigurationError(
                f"source host is empty: set the host of the '{SOURCE_CONN_ID}' connection"
            )
        if not 0 < self.port < 65536:
            raise ConfigurationError(f"source port {self.port} is not a TCP port")

    @classmethod
    def from_url(cls, url: str) -> SourceConfig:
        """``mysql://user:password@host:port/`` (the form of an Airflow connection URI)."""
        parts = urlsplit(url)
        if parts.scheme not in {"mysql", "mariadb", "mysql+pymysql"}:
            raise ConfigurationError(
                f"source URL scheme {parts.scheme!r} is not supported: use mysql://user:password@host:port/"
            )
        return cls(
            host=parts.hostname or "",
            port=parts.port or 3306,
            user=unquote(parts.username or "root"),
            password=unquote(parts.password or ""),
        )

    def url(self) -> str:
        """A URL with the password, for connectorx; never log it."""
        from urllib.parse import quote

        return f"mysql://{quote(self.user, safe='')}:{quote(self.password, safe='')}@{self.host}:{self.port}"
