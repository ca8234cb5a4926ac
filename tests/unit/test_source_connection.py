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


def test_wrapped_error_finds_our_error_inside_a_spark_trace() -> None:
    from airflow_cdc.errors import SourceError, wrapped_error

    trace = (
        "An error occurred while calling o123.collect.\n"
        "org.apache.spark.SparkException: Job aborted due to stage failure: ...\n"
        '  File "/x/pyspark/worker.py", line 1, in main\n'
        "airflow_cdc.errors.PositionPurgedError: mysql-bin.000003:4 is purged; re-snapshot\n"
        "\tat org.apache.spark.api.python.BasePythonRunner...\n"
    )
    assert wrapped_error(RuntimeError(trace)) == (
        "PositionPurgedError: mysql-bin.000003:4 is purged; re-snapshot"
    )
    assert wrapped_error(RuntimeError("a plain failure")) is None
    assert wrapped_error(SourceError("ours already says it")) is None
