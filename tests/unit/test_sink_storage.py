"""The lake's locations and credentials: the lake connection into delta-rs storage options,
the same options into pyarrow's filesystem (what the jobs stage and write with), and the
write check's local cases (the object-store cases run against SeaweedFS in
tests/integration/test_lake_object_store.py)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.fs as pafs
import pytest

from airflow_cdc.errors import ConfigurationError
from airflow_cdc.sinks.storage.connection import storage_options_from_connection
from airflow_cdc.sinks.storage.storage import Location
from airflow_cdc.sinks.storage.write_check import check_writable

SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCY"


def test_an_aws_connection_gives_delta_rs_options() -> None:
    options = storage_options_from_connection(
        "cdc_lake",
        "aws",
        "AKIAEXAMPLE",
        SECRET,
        {"endpoint_url": "http://lake:8333", "region_name": "eu-west-1"},
    )
    assert options == {
        "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_ENDPOINT_URL": "http://lake:8333",
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "eu-west-1",
        "aws_conditional_put": "etag",
    }


def test_storage_options_in_the_extra_win_and_other_stores_map_too() -> None:
    options = storage_options_from_connection(
        "lake", "aws", None, None, {"storage_options": '{"aws_conditional_put": "dynamo:t"}'}
    )
    assert options == {"aws_conditional_put": "dynamo:t"}  # no key: the default chain
    azure = storage_options_from_connection("lake", "wasb", "acct", SECRET, {"sas_token": "sv=1"})
    assert azure == {
        "AZURE_STORAGE_ACCOUNT_NAME": "acct",
        "AZURE_STORAGE_ACCOUNT_KEY": SECRET,
        "AZURE_STORAGE_SAS_TOKEN": "sv=1",
    }
    gcp = storage_options_from_connection(
        "lake", "google_cloud_platform", None, None, {"keyfile_dict": {"type": "x"}}
    )
    assert gcp == {"GOOGLE_SERVICE_ACCOUNT_KEY": '{"type": "x"}'}


@pytest.mark.parametrize(
    ("conn_type", "extra", "message"),
    [
        ("mysql", {}, "has type 'mysql'; the lake needs one of"),
        ("aws", {"storage_options": "[1]"}, "must be a JSON object"),
        ("aws", {"storage_options": "{oops"}, "must be a JSON object"),
    ],
)
def test_a_wrong_lake_connection_names_the_fix(
    conn_type: str, extra: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigurationError, match="connection 'cdc_lake'") as raised:
        storage_options_from_connection("cdc_lake", conn_type, "k", SECRET, extra)
    assert message in str(raised.value)
    assert SECRET not in str(raised.value)


def test_s3_options_build_pyarrows_filesystem_with_the_same_endpoint() -> None:
    options = {
        "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_ENDPOINT_URL": "http://127.0.0.1:8333",
        "AWS_ALLOW_HTTP": "true",
    }
    location = Location("s3://lake/cdc/", options)
    filesystem, path = location.resolve()
    assert isinstance(filesystem, pafs.S3FileSystem)
    assert path == "lake/cdc"
    assert filesystem.region == "us-east-1"  # an endpoint without region: the usual default
    assert location.resolve()[0] is filesystem  # one client per process and store
    assert location.child("_cdc_staging", "x").uri == "s3://lake/cdc/_cdc_staging/x"
    assert location.child("a").options == options
    assert (location.bucket(), location.endpoint()) == ("lake", "http://127.0.0.1:8333")
    assert SECRET not in repr(location)


def test_local_locations_resolve_to_absolute_paths(tmp_path: Path) -> None:
    filesystem, path = Location(f"file://{tmp_path}/lake").resolve()
    assert isinstance(filesystem, pafs.LocalFileSystem)
    assert path == f"{tmp_path}/lake"
    assert Location("relative/lake").resolve()[1] == str(Path("relative/lake").absolute())


def test_an_unknown_scheme_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="scheme 'ftp'"):
        Location("ftp://host/lake").resolve()


def test_the_write_check_of_local_folders(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigurationError, match="cannot be a folder"):
        check_writable(Location(str(tmp_path / "file" / "lake")))
    with pytest.raises(ConfigurationError, match="staging_path '/proc/x' is not writable"):
        check_writable(Location("/proc/x"), what="staging_path")
    check_writable(Location(str(tmp_path / "new")))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
