"""The ``[cdc]`` table (``airflow_cdc.settings``): which value of a setting counts, against a
model; its defaults are what the parsers give for an unset key; ``configured``'s messages
name where a value was set."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc import configured
from airflow_cdc.errors import ConfigurationError
from airflow_cdc.settings import (
    SETTINGS,
    Given,
    airflow_environment,
    given_by_environment,
    given_settings,
    setting,
)
from airflow_cdc.stream.health import WatchdogLimits

KEYS = [s.key for s in SETTINGS]
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)


@given(
    in_airflow=st.dictionaries(st.sampled_from(KEYS), TEXT),
    old=st.dictionaries(st.sampled_from(KEYS), TEXT),
    unrelated=st.dictionaries(st.sampled_from(["CDC_OTHER", "PATH", "AIRFLOW_HOME"]), TEXT),
)
def test_a_set_key_wins_and_an_unset_one_takes_its_old_variable(
    in_airflow: dict[str, str], old: dict[str, str], unrelated: dict[str, str]
) -> None:
    environ = {**unrelated, **{setting(k).deprecated_env_var: v for k, v in old.items()}}
    set_in_airflow = {k: (v, f"where {k}") for k, v in in_airflow.items()}
    result, deprecated = given_settings(set_in_airflow, environ)
    # The model: Airflow's value, else the old variable's, else unset (the default).
    for key in KEYS:
        if key in in_airflow:
            assert result.values[key] == in_airflow[key]
            assert result.name(key) == f"where {key}"
        elif key in old:
            assert result.values[key] == old[key]
            assert setting(key).deprecated_env_var in result.name(key)
            assert setting(key).env_var in result.name(key)
        else:
            assert key not in result.values
            assert result.name(key) == f"[cdc] {key}"
    assert {(d.setting.key, d.used) for d in deprecated} == {
        (key, key not in in_airflow) for key in old
    }
    for d in deprecated:
        assert d.setting.deprecated_env_var in d.message()
        assert (d.setting.env_var if d.used else d.setting.label) in d.message()


def test_the_environment_alone_gives_airflow_s_variables_then_the_old_ones() -> None:
    environ = {
        "AIRFLOW__CDC__TABLES": '["a.b"]',
        "CDC_TABLES": '["old.t"]',
        "CDC_STREAM_ID": "s",
        "AIRFLOW__CORE__DAGS_FOLDER": "/d",
    }
    assert airflow_environment(environ) == {"tables": ('["a.b"]', "AIRFLOW__CDC__TABLES")}
    found = given_by_environment(environ)
    assert found.values == {"tables": '["a.b"]', "stream_id": "s"}
    assert configured.configured_tables(found) == ["a.b"]
    assert configured.configured_stream_id(found) == "s"


def test_the_table_names_each_setting_once() -> None:
    assert len(KEYS) == len(set(KEYS)) == 13
    for s in SETTINGS:
        assert s.env_var == f"AIRFLOW__CDC__{s.key.upper()}"
        assert s.deprecated_env_var == f"CDC_{s.key.upper()}"
        assert s.description.strip()
        assert s.example
        assert "{" not in s.default  # Airflow formats defaults with str.format
    with pytest.raises(KeyError, match="no \\[cdc\\] setting 'table'"):
        setting("table")
    with pytest.raises(KeyError):
        Given({"table": "x"})


def test_the_defaults_are_what_an_unset_key_gives() -> None:
    """The declared default, given as the value, parses to what an unset key gives."""
    parsers = {
        "tables": configured.configured_tables,
        "exclude_tables": configured.configured_exclude_tables,
        "sink_path": configured.default_sink_path,
        "staging_path": configured.configured_staging_path,
        "columns": configured.configured_columns,
        "masks": configured.configured_masks,
        "change_metadata": configured.configured_change_metadata,
        "routes": configured.configured_routes,
        "routes_unique_keys": configured.configured_routes_unique_keys,
        "stream_id": configured.configured_stream_id,
        "chunk_retries": configured.configured_chunk_retries,
        "max_lag_seconds": configured.configured_max_lag_seconds,
        "verify_schedule": configured.configured_verify_schedule,
    }
    assert set(parsers) == set(KEYS)
    for s in SETTINGS:
        parse = parsers[s.key]
        assert parse(Given({s.key: s.default})) == parse(Given()), s.key  # type: ignore[operator]
    assert configured.configured_tables(Given()) == json.loads(setting("tables").default)
    assert configured.configured_max_lag_seconds(Given()) == WatchdogLimits().max_lag_seconds


def test_a_wrong_value_is_named_where_it_was_set() -> None:
    old = Given({"max_lag_seconds": "soon"}, {"max_lag_seconds": "CDC_MAX_LAG_SECONDS (...)"})
    with pytest.raises(ConfigurationError, match=r"^CDC_MAX_LAG_SECONDS \(...\) must be a pos"):
        configured.configured_max_lag_seconds(old)
    for bad in ("0", "-1", "nan", "inf"):
        with pytest.raises(ConfigurationError, match=r"^\[cdc\] max_lag_seconds must be"):
            configured.configured_max_lag_seconds(Given({"max_lag_seconds": bad}))
    assert configured.configured_max_lag_seconds(Given({"max_lag_seconds": " 42.5 "})) == 42.5
    assert configured.configured_verify_schedule(Given({"verify_schedule": "@daily"})) == "@daily"
    assert configured.configured_verify_schedule(Given({"verify_schedule": " "})) is None


def test_the_user_guide_lists_every_setting_with_its_default() -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "user-guide.md").read_text()
    section = guide.split("\n## Settings (`[cdc]` in Airflow's configuration)\n")[1]
    section = section.split("\n## ")[0]
    rows = re.findall(r"^\| `(\w+)` \| (`[^|]*`|empty) \| (.+) \|$", section, re.M)
    table = {key: default for key, default, _ in rows}
    assert list(table) == KEYS
    for s in SETTINGS:
        assert table[s.key] == (f"`{s.default}`" if s.default else "empty"), s.key
