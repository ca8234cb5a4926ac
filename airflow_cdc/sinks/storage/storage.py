"""Where the lake's bytes live: a local folder or an object store, reached with one set of
credentials by delta-rs (the tables) and by pyarrow (everything else the jobs write).

A :class:`Location` is a URI plus the delta-rs storage options that reach it (credentials,
endpoint: secret, so hidden from ``repr``). Jobs hand files from executors to the driver
through locations of the sink's store (``sinks.storage.staging``, ``sinks.delta.files``), never
through a disk they would have to share: on a cluster the Airflow worker, the Spark driver
and each executor may be different machines.

Supported: local paths and ``file://``, S3 and S3-compatible stores (``s3://``, ``s3a://``),
Azure (``abfs[s]://``, ``az://``; account key, SAS token or client secret), Google Cloud
Storage (``gs://``; pyarrow's default credentials). Only local folders and S3 are tested
against a real server here (SeaweedFS); the docs say which stores commit safely at once.

Storage option names follow delta-rs (``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``,
``AZURE_STORAGE_ACCOUNT_KEY``, ...), in any case; the same mapping feeds pyarrow.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pyarrow.fs as pafs

from airflow_cdc.errors import ConfigurationError

__all__ = ["Location", "is_local_uri", "local_path"]

_S3_SCHEMES = frozenset({"s3", "s3a"})
_AZURE_SCHEMES = frozenset({"abfs", "abfss", "az", "adl", "azure"})
_GCS_SCHEMES = frozenset({"gs", "gcs"})


def is_local_uri(uri: str) -> bool:
    """Whether ``uri`` is a local folder (a plain path or ``file://``)."""
    return "://" not in uri or uri.startswith("file://")


def local_path(uri: str) -> str:
    return uri.removeprefix("file://")


@dataclass(frozen=True)
class Location:
    """A file or folder of the lake and the storage options that reach it."""

    uri: str
    options: Mapping[str, str] = field(default_factory=dict, repr=False, hash=False)

    def __post_init__(self) -> None:
        if not self.uri:
            raise ConfigurationError("an empty lake location: give a folder or URI")

    @property
    def is_local(self) -> bool:
        return is_local_uri(self.uri)

    @property
    def scheme(self) -> str:
        return "file" if self.is_local else urlsplit(self.uri).scheme.lower()

    def child(self, *names: str) -> Location:
        """``<uri>/<name>/...`` with the same options."""
        return Location("/".join([self.uri.rstrip("/"), *names]), self.options)

    def resolve(self) -> tuple[pafs.FileSystem, str]:
        """pyarrow's filesystem for this location's store and the path inside it. The
        filesystem is built once per process and store (an S3 client is not free)."""
        if self.is_local:
            return pafs.LocalFileSystem(), os.path.abspath(local_path(self.uri))
        parts = urlsplit(self.uri)
        options = tuple(sorted(_folded(self.options).items()))
        scheme = parts.scheme.lower()
        if scheme in _S3_SCHEMES:
            return _s3(options), f"{parts.netloc}{parts.path}".rstrip("/")
        if scheme in _AZURE_SCHEMES:
            container, _, account = parts.netloc.partition("@")
            return _azure(options, account.split(".")[0]), f"{container}{parts.path}".rstrip("/")
        if scheme in _GCS_SCHEMES:
            return _gcs(options), f"{parts.netloc}{parts.path}".rstrip("/")
        raise ConfigurationError(
            f"the lake URI {self.uri!r} has the scheme {scheme!r}, which airflow-cdc cannot "
            "stage files on: use a local folder, s3://, abfss://, az:// or gs://"
        )

    def bucket(self) -> str:
        """The bucket or container (object stores), or the path (local)."""
        if self.is_local:
            return local_path(self.uri)
        return urlsplit(self.uri).netloc.partition("@")[0]

    def endpoint(self) -> str:
        """The endpoint the options name, if any (for messages)."""
        folded = _folded(self.options)
        return folded.get("aws_endpoint_url") or folded.get("aws_endpoint") or ""

    def probe_name(self) -> Location:
        """A fresh object name under this location for a write check."""
        return self.child(f".airflow-cdc-write-check-{uuid.uuid4().hex}")


# -- option mapping ---------------------------------------------------------------------------

#: delta-rs / object_store spellings of the same setting, folded to one name.
_ALIASES = {
    "access_key_id": "aws_access_key_id",
    "secret_access_key": "aws_secret_access_key",
    "session_token": "aws_session_token",
    "aws_token": "aws_session_token",
    "token": "aws_session_token",
    "region": "aws_region",
    "aws_default_region": "aws_region",
    "endpoint_url": "aws_endpoint_url",
    "endpoint": "aws_endpoint_url",
    "aws_endpoint": "aws_endpoint_url",
    "virtual_hosted_style_request": "aws_virtual_hosted_style_request",
    "account_name": "azure_storage_account_name",
    "azure_storage_account": "azure_storage_account_name",
    "account_key": "azure_storage_account_key",
    "azure_storage_access_key": "azure_storage_account_key",
    "sas_token": "azure_storage_sas_token",
    "client_id": "azure_client_id",
    "azure_storage_client_id": "azure_client_id",
    "client_secret": "azure_client_secret",
    "azure_storage_client_secret": "azure_client_secret",
    "tenant_id": "azure_tenant_id",
    "azure_storage_tenant_id": "azure_tenant_id",
}


def _folded(options: Mapping[str, str]) -> dict[str, str]:
    folded: dict[str, str] = {}
    for key, value in options.items():
        name = key.lower()
        folded[_ALIASES.get(name, name)] = str(value)
    return folded


def _true(text: str | None) -> bool:
    return (text or "").strip().lower() in {"1", "true", "yes", "on"}


@functools.lru_cache(maxsize=8)
def _s3(options: tuple[tuple[str, str], ...]) -> pafs.FileSystem:
    given = dict(options)
    kwargs: dict[str, object] = {
        # A wrong endpoint must fail in seconds (the probe), not after minutes of retries.
        "connect_timeout": 10,
        "request_timeout": 60,
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=5),
    }
    if "aws_access_key_id" in given:
        kwargs["access_key"] = given["aws_access_key_id"]
        kwargs["secret_key"] = given.get("aws_secret_access_key", "")
    if "aws_session_token" in given:
        kwargs["session_token"] = given["aws_session_token"]
    endpoint = given.get("aws_endpoint_url")
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        kwargs["endpoint_override"] = parts.netloc
        kwargs["scheme"] = parts.scheme
    region = given.get("aws_region") or ("us-east-1" if endpoint else None)
    if region:
        kwargs["region"] = region
    if _true(given.get("aws_virtual_hosted_style_request")):
        kwargs["force_virtual_addressing"] = True
    return pafs.S3FileSystem(**kwargs)


@functools.lru_cache(maxsize=8)
def _azure(options: tuple[tuple[str, str], ...], account: str) -> pafs.FileSystem:
    given = dict(options)
    kwargs: dict[str, object] = {
        "account_name": given.get("azure_storage_account_name") or account,
    }
    for option, name in (
        ("azure_storage_account_key", "account_key"),
        ("azure_storage_sas_token", "sas_token"),
        ("azure_client_id", "client_id"),
        ("azure_client_secret", "client_secret"),
        ("azure_tenant_id", "tenant_id"),
    ):
        if given.get(option):
            kwargs[name] = given[option]
    return pafs.AzureFileSystem(**kwargs)


@functools.lru_cache(maxsize=8)
def _gcs(options: tuple[tuple[str, str], ...]) -> pafs.FileSystem:
    # pyarrow takes Google's default credentials (GOOGLE_APPLICATION_CREDENTIALS, the
    # metadata server); delta-rs's service-account options do not map onto it.
    del options
    return pafs.GcsFileSystem()
