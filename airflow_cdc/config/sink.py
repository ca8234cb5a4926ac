"""Where the Delta tables live, and which source tables routes merge into one."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field

from airflow_cdc.errors import ConfigurationError
from airflow_cdc.model.routes import Routes

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
    #: ``{"<table pattern>": "<database>.<table>"}``: the source tables a pattern matches
    #: are written into that one Delta table (``model.routes``).
    routes: Mapping[str, str] = field(default_factory=dict, hash=False)
    #: The routed tables' keys are unique across each route's tables (the key is not
    #: widened by ``_cdc_source_table``).
    routes_unique_keys: bool = False

    def __post_init__(self) -> None:
        if not self.root:
            raise ConfigurationError(
                "sink_path is empty: give a folder (or URI) for the Delta tables"
            )
        object.__setattr__(self, "storage_options", dict(self.storage_options))
        object.__setattr__(self, "routes", dict(self.routes))
        _ = self.routing  # a route that does not parse is refused here

    @functools.cached_property
    def routing(self) -> Routes:
        """The routes, parsed."""
        try:
            return Routes.parse(self.routes, unique_keys=self.routes_unique_keys)
        except ValueError as exc:
            raise ConfigurationError(f"{exc} (the 'routes' setting)") from None

    @property
    def staging_root(self) -> str:
        return self.staging_path or f"{self.root.rstrip('/')}/_cdc_staging"
