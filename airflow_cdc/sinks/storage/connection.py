"""The lake's Airflow connection (``cdc_lake``) as delta-rs storage options.

Spelled the way the Airflow providers spell their connections, so a connection made for
them works here too:

* ``aws`` (Amazon provider): login = access key id, password = secret access key, extra
  ``endpoint_url`` (S3-compatible stores), ``region_name``, ``aws_session_token``;
* ``wasb`` / ``adls`` / ``azure_data_lake`` (Microsoft Azure provider): login = storage
  account name, password = account key, extra ``sas_token``, ``tenant_id``,
  ``client_id`` + ``client_secret``;
* ``google_cloud_platform``: extra ``key_path`` (a service account file) or
  ``keyfile_dict`` (its JSON);
* any type: extra ``storage_options``, a dict handed to delta-rs as it is (it wins over the
  fields above; e.g. ``{"AWS_S3_ALLOW_UNSAFE_RENAME": "true"}`` for a store without
  conditional writes and a single writer).

Plain Python: the hook (``hooks.lake``) reads the connection and calls
:func:`storage_options_from_connection`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from airflow_cdc.errors import ConfigurationError

__all__ = ["LAKE_CONN_TYPES", "storage_options_from_connection"]

_AWS = frozenset({"aws", "s3"})
_AZURE = frozenset({"wasb", "adls", "azure_data_lake"})
_GCP = frozenset({"google_cloud_platform", "gcp", "gcs"})
#: Connection types the lake connection may have ("generic": only ``storage_options``).
LAKE_CONN_TYPES = frozenset({*_AWS, *_AZURE, *_GCP, "generic", ""})


def storage_options_from_connection(
    conn_id: str,
    conn_type: str,
    login: str | None,
    password: str | None,
    extra: Mapping[str, Any],
) -> dict[str, str]:
    """delta-rs storage options from the parts of the lake connection ``conn_id``."""
    kind = (conn_type or "").lower()
    if kind not in LAKE_CONN_TYPES:
        raise ConfigurationError(
            f"Airflow connection {conn_id!r} has type {kind!r}; the lake needs one of "
            f"{sorted(t for t in LAKE_CONN_TYPES if t)} (e.g. 'aws' for S3 and S3-compatible "
            "stores: login = access key, password = secret, extra endpoint_url, region_name)"
        )
    if kind in _AWS:
        options = _aws(login, password, extra)
    elif kind in _AZURE:
        options = _azure(login, password, extra)
    elif kind in _GCP:
        options = _gcp(extra)
    else:
        options = {}
    given = extra.get("storage_options", {})
    if isinstance(given, str):
        try:
            given = json.loads(given)
        except ValueError:
            given = None
    if not isinstance(given, Mapping):
        raise ConfigurationError(
            f"extra 'storage_options' of connection {conn_id!r} must be a JSON object of "
            f"delta-rs storage options, got {given!r}"
        )
    options.update({str(key): str(value) for key, value in given.items()})
    return options


def _aws(login: str | None, password: str | None, extra: Mapping[str, Any]) -> dict[str, str]:
    options: dict[str, str] = {}
    if login:
        options["AWS_ACCESS_KEY_ID"] = login
        options["AWS_SECRET_ACCESS_KEY"] = password or ""
    if extra.get("aws_session_token"):
        options["AWS_SESSION_TOKEN"] = str(extra["aws_session_token"])
    endpoint = str(extra.get("endpoint_url") or "")
    if endpoint:
        options["AWS_ENDPOINT_URL"] = endpoint
        if endpoint.startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"
    region = str(extra.get("region_name") or "")
    if region:
        options["AWS_REGION"] = region
    elif endpoint:
        options["AWS_REGION"] = "us-east-1"  # S3-compatible stores ignore it; SDKs want one
    # Commits are put-if-absent (If-None-Match) by default in delta-rs; "etag" also makes
    # its conditional updates use If-Match. AWS S3 and the S3-compatible stores that
    # support conditional writes take both; see the user guide for stores that do not.
    options["aws_conditional_put"] = "etag"
    return options


def _azure(login: str | None, password: str | None, extra: Mapping[str, Any]) -> dict[str, str]:
    options: dict[str, str] = {}
    if login:
        options["AZURE_STORAGE_ACCOUNT_NAME"] = login
    if password:
        options["AZURE_STORAGE_ACCOUNT_KEY"] = password
    for name, option in (
        ("sas_token", "AZURE_STORAGE_SAS_TOKEN"),
        ("tenant_id", "AZURE_TENANT_ID"),
        ("client_id", "AZURE_CLIENT_ID"),
        ("client_secret", "AZURE_CLIENT_SECRET"),
    ):
        if extra.get(name):
            options[option] = str(extra[name])
    return options


def _gcp(extra: Mapping[str, Any]) -> dict[str, str]:
    if extra.get("keyfile_dict"):
        key = extra["keyfile_dict"]
        return {"GOOGLE_SERVICE_ACCOUNT_KEY": key if isinstance(key, str) else json.dumps(key)}
    if extra.get("key_path"):
        return {"GOOGLE_SERVICE_ACCOUNT": str(extra["key_path"])}
    return {}
