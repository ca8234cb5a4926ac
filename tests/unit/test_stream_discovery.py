"""The stream's new-table rule and the job spec that carries the patterns."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.config import (
    DiscoveryConfig,
    LakeColumnsConfig,
    SinkConfig,
    SourceConfig,
    StreamBounds,
    StreamJobSpec,
)
from airflow_cdc.errors import ConfigurationError
from airflow_cdc.metadata.records import FullSnapshot
from airflow_cdc.stream.discovery import next_step, plan_label

STATUSES = st.sampled_from(["pending", "running", "done", "failed"])


def test_a_table_never_planned_is_planned() -> None:
    assert next_step(None, "mysql_cdc") == "plan"


@given(
    st.lists(STATUSES, min_size=1, max_size=6),
    st.sampled_from(["this stream", "another stream", "a backfill"]),
)
def test_what_a_pass_does_with_a_planned_table(statuses: list[str], made_by: str) -> None:
    label = {
        "this stream": plan_label("mysql_cdc"),
        "another stream": plan_label("other"),
        "a backfill": "manual__2026-11-23",
    }[made_by]
    step = next_step(FullSnapshot(7, label, tuple(statuses)), "mysql_cdc")  # type: ignore[arg-type]
    if all(s == "done" for s in statuses):
        assert step == "none"
    elif "failed" in statuses or made_by == "this stream":
        assert step == "rerun"  # failed, or this stream's earlier driver died
    else:
        assert step == "wait"  # someone else is snapshotting it


def _spec(**fields: object) -> StreamJobSpec:
    return StreamJobSpec(
        stream_id="s",
        tables=("shop.a",),
        source=SourceConfig(host="db"),
        metadata_url="sqlite://",
        sink=SinkConfig("/lake"),
        checkpoint_dir="/ckpt",
        **fields,  # type: ignore[arg-type]
    )


def test_the_job_file_keeps_every_field() -> None:
    spec = _spec(
        discovery=DiscoveryConfig(
            patterns=("shop.*",),
            exclude_patterns=("shop.audit",),
            discover_seconds=3.5,
            chunk_rows=5000,
        ),
        bounds=StreamBounds(apply_parallelism=7, max_merge_rows=90_000),
    )
    again = StreamJobSpec.from_json(json.loads(json.dumps(spec.to_json())))
    assert again == spec
    older = spec.to_json()
    del older["discovery"]
    del older["bounds"]["apply_parallelism"]
    assert StreamJobSpec.from_json(older) == dataclasses.replace(
        spec,
        discovery=DiscoveryConfig(),
        bounds=StreamBounds(max_merge_rows=90_000),
    )
    newer = {**spec.to_json(), "bounds": {**spec.to_json()["bounds"], "turbo": True}}
    with pytest.raises(ConfigurationError, match="StreamBounds has no setting turbo"):
        StreamJobSpec.from_json(newer)


def test_the_job_file_keeps_the_lake_columns_and_the_key_only_there() -> None:
    rules = LakeColumnsConfig(
        columns={"shop.people": {"exclude": ["ssn"]}},
        masks={"shop.people.email": "hash"},
        mask_key="k3y-of-the-masks",
    )
    spec = _spec(lake_columns=rules)
    again = StreamJobSpec.from_json(json.loads(json.dumps(spec.to_json())))
    assert again == spec
    assert again.lake_columns.key == rules.key
    assert "k3y-of-the-masks" not in repr(spec)
    with pytest.raises(ConfigurationError, match="needs a key"):
        LakeColumnsConfig(masks={"shop.people.email": "hash"})


@pytest.mark.parametrize(
    ("kind", "fields"),
    [
        (DiscoveryConfig, {"discover_seconds": 0}),
        (DiscoveryConfig, {"chunk_rows": 0}),
        (StreamBounds, {"apply_parallelism": 0}),
    ],
)
def test_bad_settings_are_refused(kind: type, fields: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        kind(**fields)
