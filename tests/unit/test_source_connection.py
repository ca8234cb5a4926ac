"""Connection errors name the Airflow connection and never the password."""

from __future__ import annotations

import socket
from typing import Any

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
    # Only error classes are looked for, not the module's functions.
    assert wrapped_error(RuntimeError("first_line: not an error class")) is None


def test_first_line_of_an_error_text() -> None:
    from airflow_cdc.errors import first_line

    assert first_line("  SourceError: lost\nTraceback (most recent call last): ...", "-") == (
        "SourceError: lost"
    )
    assert first_line("", "no text") == "no text"
    assert first_line("   \n ", "no text") == "no text"
    assert first_line(None, "no text") == "no text"


def test_retry_unreachable_rides_through_a_short_outage_only() -> None:
    import pymysql

    from airflow_cdc.errors import ConfigurationError, SourceUnreachableError
    from airflow_cdc.source.connection import retry_unreachable

    slept: list[float] = []
    failures = [SourceUnreachableError("down"), pymysql.err.OperationalError(2013, "lost")]

    def flaky() -> str:
        if failures:
            raise failures.pop(0)
        return "answer"

    assert retry_unreachable(flaky, what="t", seconds=60, sleep=slept.append) == "answer"
    assert slept == [0.5, 1.0]

    def wrong_password() -> str:
        raise ConfigurationError("access denied")

    with pytest.raises(ConfigurationError, match="access denied"):
        retry_unreachable(wrong_password, what="t", seconds=60, sleep=slept.append)
    assert len(slept) == 2  # not retried

    def syntax_error() -> str:
        raise pymysql.err.ProgrammingError(1064, "syntax")

    with pytest.raises(pymysql.err.ProgrammingError):
        retry_unreachable(syntax_error, what="t", seconds=60, sleep=slept.append)

    def always_down() -> str:
        raise SourceUnreachableError("still down")

    with pytest.raises(SourceUnreachableError, match="still down"):
        retry_unreachable(always_down, what="t", seconds=0.0, sleep=slept.append)


def test_on_server_opens_a_connection_per_try_and_closes_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pymysql

    from airflow_cdc.source import connection

    opened: list[Any] = []

    class Conn:
        closed = False

        def close(self) -> None:
            self.closed = True

    def fake_connect(cfg: Any) -> Conn:
        opened.append(Conn())
        return opened[-1]

    def action(conn: Conn) -> str:
        if len(opened) == 1:
            raise pymysql.err.OperationalError(2013, "lost connection mid-query")
        return "answer"

    monkeypatch.setattr(connection, "connect", fake_connect)
    assert connection.on_server(object(), action, what="t") == "answer"  # type: ignore[arg-type]  # retried once, after 0.5 s
    assert [c.closed for c in opened] == [True, True]
