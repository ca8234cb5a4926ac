"""The CDC page in Airflow's UI: a FastAPI app that Airflow's api-server mounts at
:data:`URL_PREFIX` (``/cdc/``: the page, ``/cdc/api/pipelines``: its data as JSON) and an
entry in the navigation that opens it (an *external view*).

Airflow loads the plugin from the package's ``airflow.plugins`` entry point, with its
defaults (``plugins_manager._load_entrypoint_plugins``); a provider-info plugin would load
only with ``[core] lazy_discover_providers = False``.

Access: every route depends on Airflow's own ``requires_access_view(AccessView.WEBSITE)``:
the caller's JWT (the ``Authorization: Bearer`` header, or the UI's session cookie) is
checked by the configured auth manager, so a request without a login is refused (401) and
one the auth manager does not allow to see the UI too (403). The page reads the metadata DB
through :class:`~airflow_cdc.hooks.metadata.CdcMetadataHook` and shows no credential.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
from airflow.api_fastapi.core_api.security import requires_access_view
from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI
from fastapi.responses import HTMLResponse

from airflow_cdc.hooks.metadata import CdcMetadataHook
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.status.page_html import render_page
from airflow_cdc.status.reading import read_pipelines

__all__ = ["API_PATH", "URL_PREFIX", "CdcPagePlugin", "app"]

URL_PREFIX = "/cdc"
API_PATH = f"{URL_PREFIX}/api/pipelines"

app = FastAPI(
    title="Airflow CDC",
    description="The CDC pipelines' state from the metadata DB.",
    dependencies=[Depends(requires_access_view(AccessView.WEBSITE))],
)


@functools.cache
def _store(url: str) -> MetadataStore:
    """One store (one connection pool) per metadata DB URL for the api-server's life."""
    return MetadataStore.connect(url, migrate=False)


def _pipelines() -> list[dict[str, Any]]:
    store = _store(CdcMetadataHook().metadata_url())
    return [dataclasses.asdict(view) for view in read_pipelines(store)]


@app.get("/api/pipelines")
def pipelines() -> list[dict[str, Any]]:
    """Every stream id with its tables' phases (``status.pipelines.PipelineView``)."""
    return _pipelines()


@app.get("/", response_class=HTMLResponse)
def page() -> str:
    """The page (server-rendered, reloading itself)."""
    store = _store(CdcMetadataHook().metadata_url())
    return render_page(read_pipelines(store), API_PATH)


class CdcPagePlugin(AirflowPlugin):
    """Mounts :data:`app` and adds "CDC" to the navigation's Browse menu."""

    name = "airflow_cdc"
    # Airflow's own declarations are plain class attributes (lists): so are these.
    fastapi_apps = [{"app": app, "url_prefix": URL_PREFIX, "name": "CDC pipelines"}]  # noqa: RUF012
    external_views = [  # noqa: RUF012
        {
            "name": "CDC",
            "href": f"{URL_PREFIX}/",
            "destination": "nav",
            "category": "browse",
            "url_route": "cdc",
        }
    ]
