"""Connection errors name the Airflow connection and never the password."""

from __future__ import annotations

import socket

import pytest

from airflow_cdc.config import SourceConfig
from airflow_cdc.errors import ConfigurationError
from airflow_cdc.source.connection import connect


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_unreachable_server_names_connection_not_password() -> None:
    cfg = SourceConfig(
        host="127.0.0.1", port=_closed_port(), user="cdc", password="s3cret-pw", connect_timeout=2
    )
    with pytest.raises(ConfigurationError) as info:
        connect(cfg)
    message = str(info.value)
    assert "'cdc_source'" in message
    assert "unreachable" in message
    assert "host and port" in message
    assert "s3cret-pw" not in message
    assert info.value.__cause__ is None
