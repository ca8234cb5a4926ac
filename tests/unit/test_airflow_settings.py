"""The ``[cdc]`` section read through Airflow's conf (``airflow_cdc.airflow_settings``):
``AIRFLOW__CDC__<KEY>`` and ``airflow.cfg`` count, the provider's defaults do not; an unset
key takes its deprecated ``CDC_<KEY>`` with a warning naming the new key. (The DAG files
with each way of setting them: ``test_airflow_dag_settings.py``.)"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_cdc.airflow_settings import cdc_settings
from airflow_cdc.settings import SETTINGS


@pytest.fixture(autouse=True)
def _no_cdc_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for s in SETTINGS:
        monkeypatch.delenv(s.env_var, raising=False)
        monkeypatch.delenv(s.deprecated_env_var, raising=False)


def test_nothing_set_gives_nothing_and_no_warning(recwarn: pytest.WarningsRecorder) -> None:
    assert cdc_settings().values == {}
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]


def test_the_airflow_variable_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__CDC__STREAM_ID", "shop_stream")
    found = cdc_settings()
    assert found.values == {"stream_id": "shop_stream"}
    assert found.name("stream_id") == "AIRFLOW__CDC__STREAM_ID"


def test_an_old_variable_counts_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("CDC_TABLES", '["shop.orders"]')
    with (
        caplog.at_level(logging.WARNING),
        pytest.warns(DeprecationWarning, match="CDC_TABLES is deprecated.*AIRFLOW__CDC__TABLES"),
    ):
        found = cdc_settings()
    assert found.values == {"tables": '["shop.orders"]'}
    assert "set AIRFLOW__CDC__TABLES" in caplog.text


def test_the_airflow_variable_wins_over_the_old_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CDC_SINK_PATH", "/old")
    monkeypatch.setenv("AIRFLOW__CDC__SINK_PATH", "/new")
    with pytest.warns(DeprecationWarning, match="CDC_SINK_PATH is ignored: \\[cdc\\] sink_path"):
        found = cdc_settings()
    assert found.values == {"sink_path": "/new"}


def test_airflow_cfg_counts_and_the_provider_default_does_not(tmp_path: Path) -> None:
    """In a fresh interpreter (Airflow reads airflow.cfg when first imported)."""
    (tmp_path / "airflow.cfg").write_text("[cdc]\nchunk_retries = 0\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "CDC_"))}
    env.update(AIRFLOW_HOME=str(tmp_path), CDC_CHUNK_RETRIES="7", CDC_STREAM_ID="old_stream")
    probe = (
        "import warnings; warnings.simplefilter('ignore')\n"
        "from airflow.sdk import conf\n"
        "from airflow_cdc.airflow_settings import cdc_settings\n"
        "given = cdc_settings()\n"
        "print(sorted(given.values.items()), given.name('chunk_retries'))\n"
        # The provider declares the default: Airflow's conf has it, the reader does not count it.
        "print(conf.get('cdc', 'sink_path'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    values, default = result.stdout.strip().splitlines()[-2:]
    assert values == (
        "[('chunk_retries', '0'), ('stream_id', 'old_stream')] [cdc] chunk_retries of airflow.cfg"
    )
    assert default == "/tmp/airflow-cdc/lake"
