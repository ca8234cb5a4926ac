"""The configured set of tables and the default sink, shared by the DAG files: the
``[cdc]`` settings (:mod:`airflow_cdc.settings`, which names and describes each) parsed and
checked, each when asked for.

Pure: each function takes the settings as set (a :class:`~airflow_cdc.settings.Given`; the
Airflow face reads them through Airflow's conf, :func:`airflow_cdc.airflow_settings.cdc_settings`)
and gives the setting's default when it is unset or empty. A value it cannot take is a
:class:`ConfigurationError` naming where it was set (``AIRFLOW__CDC__TABLES``, ``[cdc]
tables``) and the form it takes.
"""

from __future__ import annotations

import json
import math
from typing import Any

from airflow_cdc.config import parse_lake_rules
from airflow_cdc.errors import ConfigurationError
from airflow_cdc.model import TablePattern
from airflow_cdc.model.lake_columns import LakeColumnRules
from airflow_cdc.model.routes import Routes
from airflow_cdc.rendered import as_bool
from airflow_cdc.settings import Given, setting

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
    "configured_routes",
    "configured_routes_unique_keys",
    "configured_staging_path",
    "configured_stream_id",
    "configured_tables",
    "configured_verify_schedule",
    "default_sink_path",
]

DEFAULT_TABLES: tuple[str, ...] = tuple(json.loads(setting("tables").default))
DEFAULT_SINK_PATH = setting("sink_path").default
DEFAULT_STREAM_ID = setting("stream_id").default
DEFAULT_CHUNK_RETRIES = int(setting("chunk_retries").default)


def configured_tables(given: Given) -> list[str]:
    """``tables`` (a JSON list of names and patterns), checked, or :data:`DEFAULT_TABLES`."""
    return _pattern_list(given, "tables", required=True) or list(DEFAULT_TABLES)


def configured_exclude_tables(given: Given) -> list[str]:
    """``exclude_tables`` (a JSON list of names and patterns), checked, or none."""
    return _pattern_list(given, "exclude_tables", required=False)


def configured_columns(given: Given) -> dict[str, Any]:
    """``columns`` (a JSON object, ``{"<table pattern>": {"exclude": [...]}}``), checked,
    or none."""
    return _lake_rules(given)[0]


def configured_masks(given: Given) -> dict[str, str]:
    """``masks`` (a JSON object, ``{"<table pattern>.<column>": "hash"}``), checked, or
    none."""
    return _lake_rules(given)[1]


def configured_lake_rules(given: Given) -> LakeColumnRules:
    """``columns`` and ``masks`` parsed: the rules every task takes by default, which the
    reports that read the metadata DB alone go by (a chunk of a table keyed by hash
    labelled without its bounds)."""
    return parse_lake_rules(*_lake_rules(given))


def configured_change_metadata(given: Given) -> bool:
    """``change_metadata`` (``true`` or ``false``), or false."""
    return _flag(given, "change_metadata")


def configured_routes(given: Given) -> dict[str, str]:
    """``routes`` (a JSON object, ``{"<table pattern>": "<database>.<table>"}``), checked,
    or none."""
    value = _json_object(given, "routes")
    if not all(isinstance(v, str) for v in value.values()):
        raise ConfigurationError(
            f"{given.name('routes')} must be a JSON object like "
            f'{{"shop.orders_*": "shop.orders"}}, got {value!r}'
        )
    try:
        Routes.parse(value)
    except ValueError as exc:
        raise ConfigurationError(f"{given.name('routes')}: {exc}") from None
    return value


def configured_routes_unique_keys(given: Given) -> bool:
    """``routes_unique_keys`` (``true`` or ``false``), or false."""
    return _flag(given, "routes_unique_keys")


def _flag(given: Given, key: str) -> bool:
    return as_bool(given.name(key), given.text(key) or setting(key).default)


def _json_object(given: Given, key: str) -> dict[str, Any]:
    """The JSON object ``key`` holds (unset or empty: an empty one)."""
    text = given.text(key)
    try:
        value = json.loads(text) if text else {}
    except ValueError as exc:
        raise ConfigurationError(f"{given.name(key)} must be a JSON object, got {text!r}") from exc
    if not isinstance(value, dict):
        raise ConfigurationError(f"{given.name(key)} must be a JSON object, got {text!r}")
    return value


def _lake_rules(given: Given) -> tuple[dict[str, Any], dict[str, str]]:
    columns, masks = (_json_object(given, key) for key in ("columns", "masks"))
    parse_lake_rules(columns, masks)
    return columns, masks


def _pattern_list(given: Given, key: str, *, required: bool) -> list[str]:
    text, name = given.text(key), given.name(key)
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


def default_sink_path(given: Given) -> str:
    """``sink_path`` or :data:`DEFAULT_SINK_PATH`."""
    return given.text("sink_path") or DEFAULT_SINK_PATH


def configured_staging_path(given: Given) -> str | None:
    """``staging_path``, or None: the sink's own staging area."""
    return given.text("staging_path") or None


def configured_stream_id(given: Given) -> str:
    """``stream_id`` or :data:`DEFAULT_STREAM_ID`: one stream for the configured set,
    whatever tables it holds, so a table added to the set can join it while it runs."""
    return given.text("stream_id") or DEFAULT_STREAM_ID


def configured_chunk_retries(given: Given) -> int:
    """``chunk_retries`` (a whole number, 0 or more) or :data:`DEFAULT_CHUNK_RETRIES`."""
    text = given.text("chunk_retries")
    if not text:
        return DEFAULT_CHUNK_RETRIES
    if not text.isdigit():
        raise ConfigurationError(
            f"{given.name('chunk_retries')} must be a whole number of retries (0 or more), "
            f"got {text!r}"
        )
    return int(text)


def configured_max_lag_seconds(given: Given) -> float:
    """``max_lag_seconds`` (a positive number of seconds), or its default."""
    text = given.text("max_lag_seconds") or setting("max_lag_seconds").default
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise ConfigurationError(
            f"{given.name('max_lag_seconds')} must be a positive number of seconds, got {text!r}"
        )
    return seconds


def configured_verify_schedule(given: Given) -> str | None:
    """``verify_schedule`` (a cron expression or preset, which Airflow checks), or None:
    ``mysql_cdc_verify`` runs when triggered."""
    return given.text("verify_schedule") or None
