"""Fixtures shared by the unit tests of the Airflow face."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_cdc.metadata import MetadataStore


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MetadataStore]:
    """A metadata DB (SQLite) that Airflow's ``cdc_metadata`` connection points at, as the
    sensor's pokes and its trigger's polls find it (a module's own ``store`` overrides it)."""
    url = f"sqlite:///{tmp_path}/meta.db"
    monkeypatch.setenv("AIRFLOW_CONN_CDC_METADATA", url)
    with MetadataStore.connect(url) as opened:
        yield opened
