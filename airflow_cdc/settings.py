"""The ``[cdc]`` section of Airflow's configuration: every setting once, with its type,
default and description, and which value of a setting counts.

A pure table that imports nothing but the standard library and the connection ids: the
provider registration (:mod:`airflow_cdc.provider_info`) declares it to Airflow from here,
so ``airflow config list --section cdc`` shows every setting with its description and
default; :mod:`airflow_cdc.configured` parses and checks the values, with these defaults;
the Airflow face (:mod:`airflow_cdc.airflow_settings`) reads them through Airflow's conf.

A setting is ``[cdc] <key>`` in ``airflow.cfg`` or ``AIRFLOW__CDC__<KEY>`` in the
environment of the DAG processor and the workers (the DAG files read them when parsed; the
sensor, the trigger and ``airflow-cdc status`` read the lake rules when they run). For one
release more, the former ``CDC_<KEY>`` environment variables are honoured when the key is
not set (:func:`given_settings`), each with a warning naming the key that replaces it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from airflow_cdc.connection_ids import LAKE_CONN_ID, MASK_CONN_ID

__all__ = [
    "SECTION",
    "SETTINGS",
    "Deprecated",
    "Given",
    "Setting",
    "airflow_environment",
    "given_by_environment",
    "given_settings",
    "setting",
]

#: The section's name in Airflow's configuration.
SECTION = "cdc"

#: Airflow's option types (``provider_info.schema.json``).
OptionType = Literal["string", "boolean", "integer", "float"]


@dataclass(frozen=True)
class Setting:
    """One ``[cdc]`` option: its key, Airflow's type, default (as ``airflow.cfg`` writes
    it) and description, and an example value. A default holds no ``{`` (Airflow formats
    defaults with ``str.format``, which ``{}`` breaks): an empty JSON value is written empty."""

    key: str
    type: OptionType
    default: str
    description: str
    example: str | None = None

    @property
    def label(self) -> str:
        """``[cdc] tables``: how messages name it."""
        return f"[{SECTION}] {self.key}"

    @property
    def env_var(self) -> str:
        """``AIRFLOW__CDC__TABLES``: Airflow's environment variable of the option."""
        return f"AIRFLOW__{SECTION.upper()}__{self.key.upper()}"

    @property
    def deprecated_env_var(self) -> str:
        """``CDC_TABLES``: the environment variable it replaces (honoured one release more)."""
        return f"CDC_{self.key.upper()}"


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "tables",
        "string",
        '["demo.orders", "demo.customers"]',
        "A JSON list of database.table names and patterns (shop.*, shop.order_*, or "
        "re:<regular expression> over database.table): the tables default of mysql_cdc "
        "and mysql_cdc_verify, and the set mysql_cdc_backfill accepts.",
        '["shop.orders", "shop.order_*"]',
    ),
    Setting(
        "exclude_tables",
        "string",
        "",
        "A JSON list of names and patterns left out of the matches of tables; empty: none.",
        '["shop.order_archive"]',
    ),
    Setting(
        "sink_path",
        "string",
        "/tmp/airflow-cdc/lake",
        "The root of the Delta tables (<root>/<database>/<table>): a folder, or an object "
        f"store URI whose credentials are the {LAKE_CONN_ID} connection's. The sink_path "
        "default of every DAG.",
        "s3://lake/cdc",
    ),
    Setting(
        "staging_path",
        "string",
        "",
        "Where the Spark jobs stage files between executors and driver; empty: "
        "<sink root>/_cdc_staging.",
        "s3://lake/cdc-staging",
    ),
    Setting(
        "columns",
        "string",
        "",
        'A JSON object: the columns that reach the lake, per table pattern ({"shop.people": '
        '{"exclude": ["ssn"]}} or {"include": [...]}; never a key column). The columns '
        "default of the DAGs that write or check the lake; empty: every column.",
        '{"shop.people": {"exclude": ["ssn"]}}',
    ),
    Setting(
        "masks",
        "string",
        "",
        'A JSON object: how a column reaches the lake ({"shop.people.email": "hash"}, "null" '
        f'or "truncate:<n>"; "hash" is keyed by the {MASK_CONN_ID} connection\'s '
        "password, a key column takes hash only). The masks default of the DAGs; the sensor "
        "and airflow-cdc status name a chunk of a table keyed by hash without its bounds "
        "by it. Empty: none.",
        '{"shop.people.email": "hash"}',
    ),
    Setting(
        "change_metadata",
        "boolean",
        "False",
        "The lake tables get the columns _cdc_op (r snapshot read, c, u, d) and "
        "_cdc_commit_ts: the change_metadata default of the DAGs.",
        "True",
    ),
    Setting(
        "routes",
        "string",
        "",
        'A JSON object {"<table pattern>": "<database>.<table>"}: sharded tables written '
        "into one Delta table, a column _cdc_source_table telling their rows apart (the "
        "routes default of the DAGs). Empty: none.",
        '{"shop.orders_*": "shop.orders"}',
    ),
    Setting(
        "routes_unique_keys",
        "boolean",
        "False",
        "The routed tables' keys are unique across each route's tables (_cdc_source_table "
        "is then not part of the key).",
        "True",
    ),
    Setting(
        "stream_id",
        "string",
        "mysql_cdc",
        "The id of mysql_cdc's stream: the one stream of the configured tables, which "
        "mysql_cdc_backfill has a new table join and which the verify, maintenance and "
        "watchdog DAGs follow.",
        "shop_stream",
    ),
    Setting(
        "chunk_retries",
        "integer",
        "2",
        "Airflow retries of each snapshot_chunk task, so a chunk that a server restart or "
        "a killed connection failed is read again without an operator; 0 leaves every "
        "failed chunk to be cleared by hand.",
        "0",
    ),
    Setting(
        "max_lag_seconds",
        "float",
        "300",
        "How long mysql_cdc_watchdog lets the stream be behind the source (or not run) "
        "before its check fails.",
        "900",
    ),
    Setting(
        "verify_schedule",
        "string",
        "",
        "mysql_cdc_verify's schedule: a cron expression or preset; empty: it runs when triggered.",
        "0 3 * * *",
    ),
)

_BY_KEY = {s.key: s for s in SETTINGS}


def setting(key: str) -> Setting:
    """The setting ``key`` (a key the table does not have is a programming error)."""
    try:
        return _BY_KEY[key]
    except KeyError:
        raise KeyError(f"no [{SECTION}] setting {key!r}: one of {', '.join(_BY_KEY)}") from None


@dataclass(frozen=True)
class Given:
    """The ``[cdc]`` values that are set, as text by key (an unset key is absent: its
    default applies), and where each was set, for messages (``AIRFLOW__CDC__TABLES``)."""

    values: Mapping[str, str] = field(default_factory=dict)
    origins: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key in (*self.values, *self.origins):
            setting(key)

    def text(self, key: str) -> str:
        """The value of ``key`` as set, stripped; empty when unset."""
        setting(key)
        return self.values.get(key, "").strip()

    def name(self, key: str) -> str:
        """Where ``key`` was set, for a message: its variable, else ``[cdc] <key>``."""
        return self.origins.get(key) or setting(key).label


@dataclass(frozen=True)
class Deprecated:
    """A deprecated ``CDC_<KEY>`` variable that is set: ``used`` (the key is not set, so
    its value counts) or ignored (the key is set and wins)."""

    setting: Setting
    used: bool

    def message(self) -> str:
        s = self.setting
        if self.used:
            return (
                f"the environment variable {s.deprecated_env_var} is deprecated and will be "
                f"removed in the next release: set {s.env_var} (or {s.key} in the [{SECTION}] "
                f"section of airflow.cfg) instead"
            )
        return (
            f"the environment variable {s.deprecated_env_var} is ignored: {s.label} is set "
            f"and wins; remove {s.deprecated_env_var}"
        )


def given_settings(
    set_in_airflow: Mapping[str, tuple[str, str]], environ: Mapping[str, str]
) -> tuple[Given, tuple[Deprecated, ...]]:
    """The values that count: each key set in Airflow's configuration (``set_in_airflow``:
    its value and where it was set) as set; an unset key takes its deprecated
    ``CDC_<KEY>`` variable of ``environ`` if that is set. Also each deprecated variable
    met, used or ignored."""
    values: dict[str, str] = {}
    origins: dict[str, str] = {}
    met: list[Deprecated] = []
    for s in SETTINGS:
        old = environ.get(s.deprecated_env_var)
        if s.key in set_in_airflow:
            values[s.key], origins[s.key] = set_in_airflow[s.key]
            if old is not None:
                met.append(Deprecated(s, used=False))
        elif old is not None:
            values[s.key] = old
            origins[s.key] = f"{s.deprecated_env_var} (deprecated: set {s.env_var})"
            met.append(Deprecated(s, used=True))
    return Given(values, origins), tuple(met)


def airflow_environment(environ: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """The ``[cdc]`` keys that ``environ`` sets as Airflow reads them
    (``AIRFLOW__CDC__<KEY>``): value and variable by key."""
    return {s.key: (environ[s.env_var], s.env_var) for s in SETTINGS if s.env_var in environ}


def given_by_environment(environ: Mapping[str, str]) -> Given:
    """The values an environment alone gives (no ``airflow.cfg``): what a process with
    only ``environ`` reads, e.g. a service of ``docker-compose.yaml``."""
    return given_settings(airflow_environment(environ), environ)[0]
