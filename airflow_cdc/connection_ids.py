"""The Airflow connection ids the product uses by default, each written once.

Every layer names them in its messages (the fix is often "check the connection X"), the
hooks and operators take them as defaults, and the provider registration names the
connection types. Imports nothing: :mod:`airflow_cdc.provider_info` reads it while Airflow
discovers providers.
"""

from __future__ import annotations

__all__ = [
    "LAKE_CONN_ID",
    "MASK_CONN_ID",
    "METADATA_CONN_ID",
    "METADATA_CONN_TYPE",
    "SOURCE_CONN_ID",
    "SOURCE_CONN_TYPE",
    "SPARK_CONN_ID",
    "conn_env_var",
]

#: The MySQL/MariaDB server the tables are read from.
SOURCE_CONN_ID = "cdc_source"
#: The metadata DB (its SQLAlchemy URL): chunk plan, watermarks, stream state.
METADATA_CONN_ID = "cdc_metadata"
#: The lake's object store (not needed for a local ``sink_path``).
LAKE_CONN_ID = "cdc_lake"
#: Its password is the key of ``hash`` masks.
MASK_CONN_ID = "cdc_mask"
#: The Spark master (the Apache Spark provider's default connection id).
SPARK_CONN_ID = "spark_default"

#: The provider's own connection type of the source server (a form without the MySQL
#: provider).
SOURCE_CONN_TYPE = "cdc_mysql"
#: The provider's connection type of the metadata DB, named as its default connection.
METADATA_CONN_TYPE = METADATA_CONN_ID


def conn_env_var(conn_id: str) -> str:
    """The environment variable Airflow reads the connection ``conn_id`` from
    (``AIRFLOW_CONN_CDC_SOURCE``)."""
    return f"AIRFLOW_CONN_{conn_id.upper()}"
