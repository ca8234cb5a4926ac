"""Bare ``postgresql://`` / ``postgres://`` / ``mysql://`` metadata URLs get the installed
driver (psycopg 3, PyMySQL), not SQLAlchemy's defaults (psycopg2, mysqlclient)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from airflow_cdc.hooks.metadata import url_from_parts
from airflow_cdc.metadata.engine import create_metadata_engine, normalize_url


@pytest.mark.parametrize(
    ("url", "driver"),
    [
        ("postgresql://u:p@h:5432/cdc", "postgresql+psycopg"),
        ("postgres://u:p@h:5432/cdc", "postgresql+psycopg"),
        ("POSTGRESQL://u:p@h/cdc", "postgresql+psycopg"),
        ("postgresql+psycopg://u:p@h/cdc", "postgresql+psycopg"),
        ("postgresql+psycopg2://u:p@h/cdc", "postgresql+psycopg2"),  # explicit: kept
        ("mysql://u:p@h/cdc", "mysql+pymysql"),
        ("mariadb://u:p@h/cdc", "mariadb+pymysql"),
        ("sqlite:////tmp/x.db", "sqlite"),
    ],
)
def test_bare_schemes_get_the_installed_driver(url: str, driver: str) -> None:
    normalized = normalize_url(sa.make_url(url))
    assert normalized.drivername == driver
    assert normalized.password == sa.make_url(url).password
    assert normalized.database == sa.make_url(url).database


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_engine_for_a_bare_postgres_url_uses_psycopg(scheme: str) -> None:
    engine = create_metadata_engine(f"{scheme}://cdc:secret@db.example:5432/cdc_metadata")
    try:
        assert engine.dialect.name == "postgresql"
        assert engine.dialect.driver == "psycopg"
        assert engine.url.database == "cdc_metadata"
    finally:
        engine.dispose()


def test_airflow_postgres_connection_becomes_a_psycopg_engine() -> None:
    """``AIRFLOW_CONN_CDC_METADATA=postgresql://...`` arrives as conn_type ``postgres``."""
    url = url_from_parts(
        conn_type="postgres",
        host="postgres",
        port=5432,
        login="cdc",
        password="p@ss/word",
        schema="cdc_metadata",
        query={},
    )
    engine = create_metadata_engine(url)
    try:
        assert engine.dialect.driver == "psycopg"
        assert (engine.url.host, engine.url.port, engine.url.database) == (
            "postgres",
            5432,
            "cdc_metadata",
        )
        assert engine.url.password == "p@ss/word"
    finally:
        engine.dispose()
