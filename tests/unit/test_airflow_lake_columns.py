"""The ``columns``, ``masks`` and ``change_metadata`` params as the operators take them
(rendered values, the mask key from its connection only when a mask hashes, every wrong
entry named before a connection is read) and the ``[cdc]`` defaults the shipped DAGs give them."""

from __future__ import annotations

import json
import logging

import pytest

from airflow_cdc.configured import (
    configured_change_metadata,
    configured_columns,
    configured_masks,
)
from airflow_cdc.errors import ConfigurationError
from airflow_cdc.operators._params import lake_columns
from airflow_cdc.settings import Given

KEY = "the-mask-key-of-this-test"
COLUMNS = {"shop.people": {"exclude": ["ssn"]}}


def test_rendered_text_is_taken_and_no_connection_is_read_without_a_hash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AIRFLOW_CONN_CDC_MASK", raising=False)
    config = lake_columns(
        json.dumps(COLUMNS), '{"shop.people.notes": "truncate:10"}', mask_conn_id="cdc_mask"
    )
    assert config.columns == COLUMNS
    assert config.masks == {"shop.people.notes": "truncate:10"}
    assert config.key is None
    assert lake_columns(None, "", mask_conn_id="cdc_mask").is_plain


def test_a_hash_takes_the_key_from_the_connection_and_never_shows_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_MY_MASK", json.dumps({"conn_type": "generic", "password": KEY})
    )
    with caplog.at_level(logging.DEBUG):
        config = lake_columns(COLUMNS, {"shop.people.email": "hash"}, mask_conn_id="my_mask")
    assert config.key is not None
    assert config.key.secret == KEY.encode()
    assert KEY not in repr(config)
    assert KEY not in caplog.text


@pytest.mark.parametrize(
    ("connection", "message"),
    [
        (None, "'cdc_mask', which does not exist: create it"),
        (json.dumps({"conn_type": "generic"}), "'cdc_mask' has no password"),
    ],
)
def test_a_hash_without_a_key_names_the_connection_to_create(
    monkeypatch: pytest.MonkeyPatch, connection: str | None, message: str
) -> None:
    if connection is None:
        monkeypatch.delenv("AIRFLOW_CONN_CDC_MASK", raising=False)
    else:
        monkeypatch.setenv("AIRFLOW_CONN_CDC_MASK", connection)
    with pytest.raises(ConfigurationError, match=message):
        lake_columns({}, {"shop.people.email": "hash"}, mask_conn_id="cdc_mask")


def test_a_wrong_entry_is_named_before_any_connection_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AIRFLOW_CONN_CDC_MASK", raising=False)
    with pytest.raises(ConfigurationError, match=r"mask of 'shop\.people\.ssn'.*'columns' and"):
        lake_columns(
            {}, {"shop.people.email": "hash", "shop.people.ssn": "sha1"}, mask_conn_id="cdc_mask"
        )
    with pytest.raises(ConfigurationError, match="columns must be a mapping"):
        lake_columns(["ssn"], {}, mask_conn_id="cdc_mask")


def test_the_settings_defaults_are_checked_when_the_dags_are_parsed() -> None:
    given = Given({"columns": json.dumps(COLUMNS), "masks": '{"shop.*.email": "hash"}'})
    assert configured_columns(given) == COLUMNS
    assert configured_masks(given) == {"shop.*.email": "hash"}
    assert configured_columns(Given()) == {}
    with pytest.raises(ConfigurationError, match=r"\[cdc\] masks must be a JSON object"):
        configured_masks(Given({"masks": '["shop.people.email"]'}))
    with pytest.raises(ConfigurationError, match="give 'null', 'truncate:<n>'"):
        configured_masks(Given({"masks": '{"shop.people.email": "md5"}'}))


@pytest.mark.parametrize(
    ("rendered", "expected"), [(True, True), ("True", True), ("false", False), (None, False)]
)
def test_change_metadata_is_taken_as_rendered(rendered: object, expected: bool) -> None:
    config = lake_columns(None, None, mask_conn_id="cdc_mask", change_metadata=rendered)
    assert config.change_metadata is expected
    assert config.is_plain  # no rule on the columns


def test_change_metadata_refuses_what_is_no_flag() -> None:
    with pytest.raises(ConfigurationError, match="change_metadata must be true or false"):
        lake_columns(None, None, mask_conn_id="cdc_mask", change_metadata="yes please")
    assert configured_change_metadata(Given({"change_metadata": "true"})) is True
    assert configured_change_metadata(Given()) is False
    with pytest.raises(ConfigurationError, match=r"\[cdc\] change_metadata must be true or"):
        configured_change_metadata(Given({"change_metadata": "on"}))


def test_the_dag_params_and_the_arguments_that_take_them_are_the_same_names() -> None:
    from airflow_cdc.operators import dag_params

    assert tuple(dag_params.lake_columns_params(Given())) == dag_params.LAKE_COLUMNS_PARAMS
    assert tuple(dag_params.routes_params(Given())) == dag_params.ROUTES_PARAMS
    assert dag_params.lake_columns_args() == {
        name: f"{{{{ params.{name} }}}}" for name in dag_params.LAKE_COLUMNS_PARAMS
    }
