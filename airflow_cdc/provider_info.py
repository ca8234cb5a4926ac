"""Airflow provider registration (the ``apache_airflow_provider`` entry point).

Airflow calls :func:`get_provider_info` while it discovers providers, which happens while
``airflow`` itself is being imported and configured. This module therefore imports only
the two tables that import nothing but the standard library (the connection ids and the
``[cdc]`` settings): importing ``airflow`` (or anything that does) from here would recurse
into that discovery, and every Airflow command would pay for a heavier import.
The package name must equal the distribution name (``airflow-cdc``): Airflow refuses a
provider whose ``package-name`` differs from the installed distribution.
"""

from __future__ import annotations

from typing import Any

from airflow_cdc.connection_ids import METADATA_CONN_TYPE, SOURCE_CONN_TYPE
from airflow_cdc.settings import SECTION, SETTINGS, Setting

__all__ = ["get_provider_info"]

_INTEGRATION = "airflow-cdc"
_VERSION = "0.1.0"  # keep equal to airflow_cdc.__version__ (not imported: see module docstring)


def get_provider_info() -> dict[str, Any]:
    """The provider dict, in the shape of ``airflow/provider_info.schema.json``."""
    return {
        "package-name": "airflow-cdc",
        "name": "Airflow CDC",
        "description": (
            "Lock-free incremental-snapshot change data capture from MySQL/MariaDB into "
            "Delta Lake, run by Apache Airflow and Spark."
        ),
        "versions": [_VERSION],
        "integrations": [
            {
                "integration-name": _INTEGRATION,
                "external-doc-url": "https://github.com/airflow-cdc/airflow-cdc",
                "tags": ["service"],
            }
        ],
        # Every module defining a hook, operator, sensor or trigger (a test compares).
        "hooks": _modules("hooks.source", "hooks.metadata", "hooks.lake", "hooks.mask"),
        "operators": _modules(
            "operators.plan",
            "operators.snapshot",
            "operators.stream",
            "operators.verify",
            "operators.upkeep",
            "operators.watchdog",
        ),
        "sensors": _modules("sensors.chunks"),
        "triggers": _modules("triggers.chunks"),
        # No "plugins": the CDC page is the ``airflow.plugins`` entry point's (pyproject),
        # which Airflow loads whatever [core] lazy_discover_providers says; listed here too,
        # Airflow would register it a second time when providers are not lazy ("Plugin
        # 'airflow_cdc' already registered", a plugin import error). Cosmos does the same.
        # Own connection types, so the UI offers a form even where the MySQL provider is not
        # installed. The hooks also accept the common types (mysql, sqlite, postgres, ...).
        "connection-types": [
            {
                "connection-type": SOURCE_CONN_TYPE,
                "hook-class-name": "airflow_cdc.hooks.source.CdcSourceHook",
                "hook-name": "CDC source (MySQL/MariaDB)",
            },
            {
                "connection-type": METADATA_CONN_TYPE,
                "hook-class-name": "airflow_cdc.hooks.metadata.CdcMetadataHook",
                "hook-name": "CDC metadata DB (SQLAlchemy URL)",
            },
        ],
        "config": {
            SECTION: {
                "description": (
                    "Defaults of the shipped DAGs (their params) and the pipeline's settings, "
                    "read by the DAG processor and the workers when they parse the DAG files, "
                    "and by the sensor, the trigger and airflow-cdc status."
                ),
                "options": {s.key: _option(s) for s in SETTINGS},
            }
        },
    }


def _option(setting: Setting) -> dict[str, Any]:
    """A ``[cdc]`` option in the shape of the schema's ``option``."""
    return {
        "description": setting.description,
        "version_added": None,
        "type": setting.type,
        "example": setting.example,
        "default": setting.default,
    }


def _modules(*names: str) -> list[dict[str, Any]]:
    """One section's entry: the integration's modules ``airflow_cdc.<name>``."""
    return [
        {"integration-name": _INTEGRATION, "python-modules": [f"airflow_cdc.{n}" for n in names]}
    ]
