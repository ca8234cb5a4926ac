"""The provider registration: shape, no Airflow import, and Airflow really lists it."""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

from airflow_cdc.provider_info import get_provider_info

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def test_provider_info_shape() -> None:
    info = get_provider_info()
    assert info["package-name"] == "airflow-cdc"
    assert info["name"]
    assert info["description"]
    assert info["versions"] == [importlib.import_module("airflow_cdc").__version__]
    modules = [
        m
        for section in ("hooks", "operators", "sensors", "triggers")
        for e in info[section]
        for m in e["python-modules"]
    ]
    assert {"airflow_cdc.operators.snapshot", "airflow_cdc.triggers.chunks"} <= set(modules)
    for name in modules:
        importlib.import_module(name)
    for conn_type in info["connection-types"]:
        module, _, cls = conn_type["hook-class-name"].rpartition(".")
        hook = getattr(importlib.import_module(module), cls)
        assert hook.conn_type == conn_type["connection-type"]
        assert hook.conn_name_attr
        assert hook.default_conn_name
        assert hook.hook_name


def test_provider_info_validates_against_airflow_schema() -> None:
    import airflow
    import jsonschema

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    jsonschema.validate(get_provider_info(), schema)


def test_provider_info_module_imports_nothing() -> None:
    """Airflow calls it while importing itself: an airflow import there would recurse."""
    import airflow_cdc.provider_info as module

    tree = ast.parse(Path(module.__file__ or "").read_text())
    imported = [
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    ]
    assert set(imported) <= {"__future__", "typing"}, imported


def test_airflow_providers_list_shows_airflow_cdc(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(AIRFLOW_HOME=str(tmp_path), AIRFLOW__CORE__LOAD_EXAMPLES="False")
    result = subprocess.run(
        [str(VENV_BIN / "airflow"), "providers", "list", "--output", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    start = result.stdout.index("[")
    providers = {p["package_name"]: p for p in json.loads(result.stdout[start:])}
    assert "airflow-cdc" in providers, sorted(providers)
    assert providers["airflow-cdc"]["version"] == "0.1.0"


def test_the_plugin_entry_point_is_a_valid_airflow_plugin_with_the_page() -> None:
    """The page is the ``airflow.plugins`` entry point's (loaded with Airflow's defaults),
    and not also the provider info's (which would register it twice)."""
    from importlib.metadata import entry_points

    from airflow.plugins_manager import AirflowPlugin, is_valid_plugin

    assert "plugins" not in get_provider_info()
    (entry,) = [
        e for e in entry_points(group="airflow.plugins") if e.module.startswith("airflow_cdc")
    ]
    plugin = entry.load()
    assert issubclass(plugin, AirflowPlugin)
    assert is_valid_plugin(plugin)
    assert plugin.name == entry.name == "airflow_cdc"
    (app,) = plugin.fastapi_apps
    routes = {getattr(route, "path", None) for route in app["app"].routes}
    assert {"/", "/api/pipelines"} <= routes
    (view,) = plugin.external_views
    assert view["href"] == f"{app['url_prefix']}/"
