"""The configured set of tables and the default sink, shared by the DAG files.

Read when a DAG file is parsed, from environment variables of the DAG processor (and of the
workers, which parse the file again):

* ``CDC_TABLES``: a JSON list of ``database.table`` names and patterns (``shop.*``,
  ``shop.order_*``, ``re:<regular expression>``; see ``model.selection``; default: the
  demo tables). It is the ``tables`` default of ``mysql_cdc`` and the set that
  ``mysql_cdc_backfill`` accepts.
* ``CDC_EXCLUDE_TABLES``: a JSON list of names and patterns left out of ``CDC_TABLES``'
  matches (default: none).
* ``CDC_COLUMNS`` and ``CDC_MASKS``: JSON objects, the ``columns`` and ``masks`` defaults
  of the DAGs that write or check the lake (``model.lake_columns``; default: none, every
  column as it is).
* ``CDC_CHANGE_METADATA``: ``true`` gives the lake tables the change metadata columns
  ``_cdc_op`` and ``_cdc_commit_ts`` (the ``change_metadata`` default of the same DAGs;
  default false).
* ``CDC_ROUTES``: a JSON object, the ``routes`` default of the same DAGs (``{"<table
  pattern>": "<database>.<table>"}``: sharded tables written into one Delta table;
  ``model.routes``; default: none); ``CDC_ROUTES_UNIQUE_KEYS``: ``true`` when their keys
  are unique across each route's tables (default false).
* ``CDC_SINK_PATH``: the default root of the Delta tables (a folder, or an object-store
  URI such as ``s3://bucket/lake`` whose credentials are the ``cdc_lake`` connection's).
* ``CDC_STAGING_PATH``: where the Spark jobs stage files between executors and driver
  (default: ``<sink root>/_cdc_staging``).
* ``CDC_STREAM_ID``: the id of ``mysql_cdc``'s stream (default ``mysql_cdc``), which
  ``mysql_cdc_backfill`` asks to follow a table new to it.
* ``CDC_CHUNK_RETRIES``: Airflow retries of each ``snapshot_chunk`` task (default 2), so a
  chunk that a server restart or a killed connection failed is read again without an
  operator; 0 leaves every failed chunk to be cleared by hand.
* ``CDC_MAX_LAG_SECONDS``: how long ``mysql_cdc_watchdog`` lets the stream be behind the
  source (or not run) before it fails (default: ``WatchdogLimits``', 300).

Read by the chunk and stream tasks when they run (the worker's environment):

* ``CDC_PROBE`` and ``CDC_PROBE_ARGUMENT``: an observer of the jobs' phases
  (``airflow_cdc.probe``), ``module:callable`` and its argument; unset in production.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from typing import Any

from airflow_cdc.config import parse_lake_rules
from airflow_cdc.errors import ConfigurationError
from airflow_cdc.model import TablePattern
from airflow_cdc.model.lake_columns import LakeColumnRules
from airflow_cdc.model.routes import Routes
from airflow_cdc.probe import ProbeConfig
from airflow_cdc.rendered import as_bool

__all__ = [
    "DEFAULT_CHUNK_RETRIES",
    "DEFAULT_SINK_PATH",
    "DEFAULT_STREAM_ID",
    "DEFAULT_TABLES",
    "configured_change_metadata",
    "configured_chunk_retries",
    "configured_columns",
    "configured_exclude_tables",
    "configured_lake_rules",
    "configured_masks",
    "configured_max_lag_seconds",
    "configured_probe",
    "configured_routes",
    "configured_routes_unique_keys",
    "configured_staging_path",
    "configured_stream_id",
    "configured_tables",
    "default_sink_path",
]

DEFAULT_TABLES = ("demo.orders", "demo.customers")
DEFAULT_SINK_PATH = "/tmp/airflow-cdc/lake"
DEFAULT_STREAM_ID = "mysql_cdc"
DEFAULT_CHUNK_RETRIES = 2


def configured_tables(environ: Mapping[str, str] | None = None) -> list[str]:
    """``CDC_TABLES`` (a JSON list of names and patterns), checked, or :data:`DEFAULT_TABLES`."""
    env = os.environ if environ is None else environ
    return _pattern_list(env, "CDC_TABLES", required=True) or list(DEFAULT_TABLES)


def configured_exclude_tables(environ: Mapping[str, str] | None = None) -> list[str]:
    """``CDC_EXCLUDE_TABLES`` (a JSON list of names and patterns), checked, or none."""
    env = os.environ if environ is None else environ
    return _pattern_list(env, "CDC_EXCLUDE_TABLES", required=False)


def configured_columns(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``CDC_COLUMNS`` (a JSON object, ``{"<table pattern>": {"exclude": [...]}}``),
    checked, or none."""
    return _lake_rules(os.environ if environ is None else environ)[0]


def configured_masks(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``CDC_MASKS`` (a JSON object, ``{"<table pattern>.<column>": "hash"}``), checked,
    or none."""
    return _lake_rules(os.environ if environ is None else environ)[1]


def configured_lake_rules(environ: Mapping[str, str] | None = None) -> LakeColumnRules:
    """``CDC_COLUMNS`` and ``CDC_MASKS`` parsed: the rules every task takes by default,
    which the reports that read the metadata DB alone go by (a chunk of a table keyed by
    hash labelled without its bounds)."""
    return parse_lake_rules(*_lake_rules(os.environ if environ is None else environ))


def configured_change_metadata(environ: Mapping[str, str] | None = None) -> bool:
    """``CDC_CHANGE_METADATA`` (``true`` or ``false``), or false."""
    env = os.environ if environ is None else environ
    return as_bool("CDC_CHANGE_METADATA", env.get("CDC_CHANGE_METADATA", ""))


def configured_routes(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``CDC_ROUTES`` (a JSON object, ``{"<table pattern>": "<database>.<table>"}``),
    checked, or none."""
    value = _json_object(os.environ if environ is None else environ, "CDC_ROUTES")
    if not all(isinstance(v, str) for v in value.values()):
        raise ConfigurationError(
            f'CDC_ROUTES must be a JSON object like {{"shop.orders_*": "shop.orders"}}, '
            f"got {value!r}"
        )
    try:
        Routes.parse(value)
    except ValueError as exc:
        raise ConfigurationError(f"CDC_ROUTES: {exc}") from None
    return value


def configured_routes_unique_keys(environ: Mapping[str, str] | None = None) -> bool:
    """``CDC_ROUTES_UNIQUE_KEYS`` (``true`` or ``false``), or false."""
    env = os.environ if environ is None else environ
    return as_bool("CDC_ROUTES_UNIQUE_KEYS", env.get("CDC_ROUTES_UNIQUE_KEYS", ""))


def _json_object(env: Mapping[str, str], name: str) -> dict[str, Any]:
    """The JSON object in ``env[name]`` (none: empty)."""
    text = env.get(name, "").strip()
    try:
        value = json.loads(text) if text else {}
    except ValueError as exc:
        raise ConfigurationError(f"{name} must be a JSON object, got {text!r}") from exc
    if not isinstance(value, dict):
        raise ConfigurationError(f"{name} must be a JSON object, got {text!r}")
    return value


def _lake_rules(env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    columns, masks = (_json_object(env, name) for name in ("CDC_COLUMNS", "CDC_MASKS"))
    parse_lake_rules(columns, masks)
    return columns, masks


def _pattern_list(env: Mapping[str, str], name: str, *, required: bool) -> list[str]:
    text = env.get(name, "").strip()
    if not text:
        return []
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(
            f'{name} must be a JSON list like ["shop.orders", "shop.order_*"], got {text!r}'
        ) from exc
    if (
        not isinstance(value, list)
        or (required and not value)
        or not all(isinstance(v, str) for v in value)
    ):
        raise ConfigurationError(
            f"{name} must be a {'non-empty ' if required else ''}JSON list of "
            f'"database.table" names or patterns, got {text!r}'
        )
    for entry in value:
        try:
            TablePattern.parse(entry)
        except ValueError as exc:
            raise ConfigurationError(f"{name}: {exc}") from exc
    return list(dict.fromkeys(value))


def default_sink_path(environ: Mapping[str, str] | None = None) -> str:
    """``CDC_SINK_PATH`` or :data:`DEFAULT_SINK_PATH`."""
    env = os.environ if environ is None else environ
    return env.get("CDC_SINK_PATH", "") or DEFAULT_SINK_PATH


def configured_staging_path(environ: Mapping[str, str] | None = None) -> str | None:
    """``CDC_STAGING_PATH``, or None: the sink's own staging area."""
    env = os.environ if environ is None else environ
    return env.get("CDC_STAGING_PATH", "").strip() or None


def configured_stream_id(environ: Mapping[str, str] | None = None) -> str:
    """``CDC_STREAM_ID`` or :data:`DEFAULT_STREAM_ID`: one stream for the configured set,
    whatever tables it holds, so a table added to the set can join it while it runs."""
    env = os.environ if environ is None else environ
    return env.get("CDC_STREAM_ID", "").strip() or DEFAULT_STREAM_ID


def configured_chunk_retries(environ: Mapping[str, str] | None = None) -> int:
    """``CDC_CHUNK_RETRIES`` (a whole number, 0 or more) or :data:`DEFAULT_CHUNK_RETRIES`."""
    env = os.environ if environ is None else environ
    text = env.get("CDC_CHUNK_RETRIES", "").strip()
    if not text:
        return DEFAULT_CHUNK_RETRIES
    if not text.isdigit():
        raise ConfigurationError(
            f"CDC_CHUNK_RETRIES must be a whole number of retries (0 or more), got {text!r}"
        )
    return int(text)


def configured_max_lag_seconds(environ: Mapping[str, str] | None = None) -> float | None:
    """``CDC_MAX_LAG_SECONDS`` (a positive number), or None: the watchdog's default."""
    env = os.environ if environ is None else environ
    text = env.get("CDC_MAX_LAG_SECONDS", "").strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise ConfigurationError(
            f"CDC_MAX_LAG_SECONDS must be a positive number of seconds, got {text!r}"
        )
    return seconds


def configured_probe(environ: Mapping[str, str] | None = None) -> ProbeConfig:
    """``CDC_PROBE`` and ``CDC_PROBE_ARGUMENT``, or no probe."""
    env = os.environ if environ is None else environ
    return ProbeConfig(env.get("CDC_PROBE", "").strip(), env.get("CDC_PROBE_ARGUMENT", "").strip())
