"""Hooks: Airflow connections -> SourceConfig / metadata URL, without leaking passwords."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from airflow_cdc.errors import ConfigurationError
from airflow_cdc.hooks import CdcMetadataHook, CdcSourceHook
from airflow_cdc.hooks.metadata import safe_url

SECRET = "s3cr3t:p@ss/word"


def _set_conn(monkeypatch: pytest.MonkeyPatch, conn_id: str, value: str) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", value)


def test_source_config_from_uri(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from urllib.parse import quote

    _set_conn(monkeypatch, "src_uri", f"mysql://cdc:{quote(SECRET, safe='')}@db.example:3307/")
    with caplog.at_level(logging.DEBUG):
        cfg = CdcSourceHook("src_uri").source_config()
    assert (cfg.host, cfg.port, cfg.user, cfg.password) == ("db.example", 3307, "cdc", SECRET)
    assert SECRET not in repr(cfg)
    out = capsys.readouterr()
    logged = caplog.text + out.out + out.err
    assert "cdc@db.example:3307" in logged  # the log line was captured ...
    assert SECRET not in logged  # ... and holds no password


def test_source_config_from_json_with_extras(monkeypatch: pytest.MonkeyPatch) -> None:
    _set_conn(
        monkeypatch,
        "src_json",
        '{"conn_type": "cdc_mysql", "host": "h", "login": "u", "password": "pw", '
        '"extra": {"connect_timeout": "5", "server_id_base": 7000}}',
    )
    cfg = CdcSourceHook("src_json").source_config()
    assert (cfg.host, cfg.port, cfg.user, cfg.connect_timeout, cfg.server_id_base) == (
        "h",
        3306,
        "u",
        5,
        7000,
    )


def test_source_missing_or_wrong_type(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match="AIRFLOW_CONN_NO_SUCH_SOURCE"):
        CdcSourceHook("no_such_source").source_config()
    _set_conn(monkeypatch, "src_pg", "postgresql://u:p@h:5432/db")
    with pytest.raises(ConfigurationError, match="MySQL or MariaDB"):
        CdcSourceHook("src_pg").source_config()
    _set_conn(monkeypatch, "src_nohost", '{"conn_type": "mysql", "login": "u"}')
    with pytest.raises(ConfigurationError, match="host"):
        CdcSourceHook("src_nohost").source_config()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("sqlite:////var/lib/cdc/meta.db", "sqlite:////var/lib/cdc/meta.db"),
        ("sqlite:///relative/meta.db", "sqlite:///relative/meta.db"),
        ("postgresql://u:p%40ss@h:5432/cdc", "postgresql://u:p%40ss@h:5432/cdc"),
        ("postgres://u:pw@h/cdc?sslmode=require", "postgresql://u:pw@h/cdc?sslmode=require"),
        ("mysql://u:pw@h:3306/meta", "mysql+pymysql://u:pw@h:3306/meta"),
        (
            '{"conn_type": "cdc_metadata", "extra": {"url": "sqlite:////x/y.db"}}',
            "sqlite:////x/y.db",
        ),
    ],
)
def test_metadata_url(monkeypatch: pytest.MonkeyPatch, value: str, expected: str) -> None:
    conn_id = f"meta_{abs(hash(value))}"
    _set_conn(monkeypatch, conn_id, value)
    assert CdcMetadataHook(conn_id).metadata_url() == expected


def test_metadata_default_is_sqlite_in_airflow_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    with caplog.at_level(logging.INFO):
        url = CdcMetadataHook("no_such_metadata").metadata_url()
    assert url == f"sqlite:///{tmp_path}/cdc_metadata.db"


def test_the_metadata_url_is_logged_at_info_once_a_process(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The CDC page reads it at every refresh: the log says it once."""
    conn_id = "meta_logged_once"
    _set_conn(monkeypatch, conn_id, "sqlite:///tmp/logged-once.db")
    with caplog.at_level(logging.INFO):
        for _ in range(3):
            CdcMetadataHook(conn_id).metadata_url()
    out = capsys.readouterr()
    assert (caplog.text + out.out + out.err).count("logged-once.db") == 1


def test_metadata_type_without_url_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _set_conn(monkeypatch, "meta_bare", '{"conn_type": "cdc_metadata", "host": "h"}')
    with pytest.raises(ConfigurationError, match="url"):
        CdcMetadataHook("meta_bare").metadata_url()


def test_safe_url_hides_password() -> None:
    assert "secret" not in safe_url("postgresql://u:secret@h/db")
    assert safe_url("not a url") == "<unparsable URL>"


def test_lake_options_from_an_aws_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_cdc.hooks import CdcLakeHook

    _set_conn(
        monkeypatch,
        "cdc_lake",
        '{"conn_type": "aws", "login": "AKIA", "password": "'
        + SECRET
        + '", "extra": {"endpoint_url": "http://lake:8333"}}',
    )
    hook = CdcLakeHook()
    assert hook.defined()
    options = hook.storage_options()
    assert options["AWS_SECRET_ACCESS_KEY"] == SECRET
    assert options["AWS_ENDPOINT_URL"] == "http://lake:8333"
    assert not CdcLakeHook("no_such_lake").defined()
    assert CdcLakeHook("no_such_lake").storage_options() == {}  # a local lake needs none


def test_the_default_connection_ids_are_the_constants() -> None:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    from airflow_cdc import connection_ids as ids
    from airflow_cdc.hooks import CdcMetadataHook, CdcSourceHook
    from airflow_cdc.hooks.lake import CdcLakeHook
    from airflow_cdc.hooks.mask import CdcMaskHook

    assert CdcSourceHook.default_conn_name == ids.SOURCE_CONN_ID == "cdc_source"
    assert CdcMetadataHook.default_conn_name == ids.METADATA_CONN_ID == "cdc_metadata"
    assert CdcLakeHook.default_conn_name == ids.LAKE_CONN_ID == "cdc_lake"
    assert CdcMaskHook.default_conn_name == ids.MASK_CONN_ID == "cdc_mask"
    assert SparkSubmitHook.default_conn_name == ids.SPARK_CONN_ID  # the provider's default
    assert ids.conn_env_var(ids.SOURCE_CONN_ID) == "AIRFLOW_CONN_CDC_SOURCE"
