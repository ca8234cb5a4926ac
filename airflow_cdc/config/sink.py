"""Where the Delta tables live."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from airflow_cdc.errors import ConfigurationError

__all__ = ["SinkConfig"]


@dataclass(frozen=True)
class SinkConfig:
    """Where the Delta tables live, ``<root>/<database>/<table>``, and how to reach them."""

    #: A local folder or an object-store URI (``s3://bucket/lake``).
    root: str
    #: delta-rs storage options (credentials, endpoint) from the lake connection; secret.
    storage_options: Mapping[str, str] = field(default_factory=dict, repr=False, hash=False)
    #: Where the jobs' executors stage files for the driver; empty: ``<root>/_cdc_staging``.
    staging_path: str = ""

    def __post_init__(self) -> None:
        if not self.root:
            raise ConfigurationError(
                "sink_path is empty: give a folder (or URI) for the Delta tables"
            )
        object.__setattr__(self, "storage_options", dict(self.storage_options))

    @property
    def staging_root(self) -> str:
        return self.staging_path or f"{self.root.rstrip('/')}/_cdc_staging"
