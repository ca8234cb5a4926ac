"""Is the lake reachable and writable? Checked by the Airflow tasks before any Spark job
starts, so a typo in a path, a bucket or a key fails in seconds with a message that names
the fix, instead of inside every executor with a storage library's error.

The check writes and deletes one probe object (permission bits, bucket policies and
read-only mounts decide only when something is written), then lets delta-rs list the root
with the same options (it has its own client, e.g. it refuses plain http unless allowed).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pyarrow.fs as pafs

from airflow_cdc.errors import ConfigurationError, first_line
from airflow_cdc.sinks.storage.storage import Location, local_path

__all__ = ["check_writable"]

#: What an error without a text says.
_UNKNOWN = "unknown error"


def _local_fix(what: str) -> str:
    return f"give a folder the Airflow workers and the Spark jobs can write (param {what})"


def check_writable(
    location: Location, *, conn_id: str | None = None, what: str = "sink_path"
) -> None:
    """Raise :class:`ConfigurationError` unless ``location`` takes a write. ``conn_id``:
    the Airflow connection its options came from (named in the message), if any."""
    if location.is_local:
        _check_local_folder(location.uri, what)
    else:
        _check_store(location, conn_id, what)


def _check_local_folder(root: str, what: str) -> None:
    path = Path(local_path(root)).expanduser().absolute()
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigurationError(
            f"{what} {root!r} cannot be a folder: {existing} is a file; {_local_fix(what)}"
        )
    where = "" if existing == path else f" (its nearest existing folder {existing})"
    try:
        handle, probe = tempfile.mkstemp(prefix=".cdc-write-check-", dir=existing)
    except OSError as exc:
        raise ConfigurationError(
            f"{what} {root!r} is not writable{where}: {exc.strerror or exc}; {_local_fix(what)}, "
            "or fix its permissions"
        ) from None
    os.close(handle)
    os.unlink(probe)


def _check_store(location: Location, conn_id: str | None, what: str) -> None:
    filesystem, root = location.resolve()
    source = _credentials_source(location, conn_id)
    # The bucket's HEAD tells a missing bucket (some stores create one on a first write);
    # a listing tells why access fails (a HEAD's answer has no body); then the write a
    # reader could not make.
    step = "looking up the bucket"
    try:
        try:
            missing = filesystem.get_file_info(location.bucket()).type == pafs.FileType.NotFound
        except OSError:
            missing = False
            step = "listing it"
            filesystem.get_file_info(pafs.FileSelector(root, allow_not_found=True))
            raise
        if missing:
            raise ConfigurationError(
                f"{what} {location.uri!r}: the bucket {location.bucket()!r} does not exist"
                f"{_at(location)} (reached with {source}): create it, or fix {what}"
            )
        step = "listing it"
        filesystem.get_file_info(pafs.FileSelector(root, allow_not_found=True))
        probe = location.probe_name()
        fs, path = probe.resolve()
        step = "writing a probe object"
        with fs.open_output_stream(path) as out:
            out.write(b"airflow-cdc write check\n")
        step = "deleting the probe object"
        fs.delete_file(path)
    except OSError as exc:
        raise ConfigurationError(
            f"{what} {location.uri!r} is not usable with {source} ({step} failed): "
            f"{_diagnosis(str(exc), location, conn_id, what)}"
        ) from None
    _check_delta_rs(location, source, what)


def _check_delta_rs(location: Location, source: str, what: str) -> None:
    # Lazy: importing this module, or checking a local folder, needs no delta-rs (slow).
    from deltalake import DeltaTable

    try:
        DeltaTable.is_deltatable(location.child("_airflow_cdc_check").uri, dict(location.options))
    except Exception as exc:
        raise ConfigurationError(
            f"{what} {location.uri!r}: delta-rs cannot use the store with {source}, although "
            f"pyarrow could write to it: {first_line(str(exc), _UNKNOWN)}. Check the storage options "
            "(e.g. AWS_ALLOW_HTTP=true for an http:// endpoint)"
        ) from None


def _credentials_source(location: Location, conn_id: str | None) -> str:
    if conn_id is None:
        return "the storage options given"
    return (
        f"the Airflow connection {conn_id!r}"
        if location.options
        else (
            f"no credentials (the Airflow connection {conn_id!r} is not defined; the store's "
            "default credentials were tried)"
        )
    )


def _at(location: Location) -> str:
    return f" at {location.endpoint()}" if location.endpoint() else ""


def _diagnosis(text: str, location: Location, conn_id: str | None, what: str) -> str:
    """What an object store's error means and how to fix it."""
    upper = text.upper()
    conn = f"connection {conn_id!r}" if conn_id else "the storage options"
    has_key = any(k.lower() in {"aws_access_key_id", "access_key_id"} for k in location.options)
    if "SIGNATURE_DOES_NOT_MATCH" in upper or "SIGNATUREDOESNOTMATCH" in upper:
        return f"the store refused the secret key: fix the password of {conn}"
    if "INVALID_ACCESS_KEY_ID" in upper or "INVALIDACCESSKEYID" in upper:
        return f"the store does not know the access key: fix the login of {conn}"
    if "ACCESS_DENIED" in upper or "ACCESSDENIED" in upper:
        if not has_key:
            return (
                f"access denied without credentials: set the login (access key) and password "
                f"(secret) of {conn}, or give the workers a role that may write the bucket"
            )
        return (
            f"access denied: let the access key of {conn} read, write, list and delete "
            f"objects in the bucket {location.bucket()!r}"
        )
    if "NETWORK_CONNECTION" in upper or "CURLCODE" in upper or "COULD NOT CONNECT" in upper:
        return (
            f"cannot reach the store{_at(location)} ({first_line(text, _UNKNOWN)}): fix the extra "
            f"endpoint_url of {conn}, or start the store"
        )
    if "NO_SUCH_BUCKET" in upper or "NOSUCHBUCKET" in upper:
        return (
            f"the bucket {location.bucket()!r} does not exist{_at(location)}: create it, "
            f"or fix {what}"
        )
    return first_line(text, _UNKNOWN)
