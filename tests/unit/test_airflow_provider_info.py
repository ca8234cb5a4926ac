"""The provider registration: shape, no Airflow import, and Airflow really lists it."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from airflow_cdc.provider_info import get_provider_info
from airflow_cdc.settings import SECTION, SETTINGS, setting
from tests.unit.test_import_rules import AIRFLOW_FACE

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
    assert len(modules) == len(set(modules))
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


def test_provider_info_imports_no_airflow_and_only_the_light_tables() -> None:
    """Airflow calls it while importing itself: an airflow import there would recurse, and
    every Airflow command pays for what it imports."""
    probe = (
        "import sys, airflow_cdc.provider_info as p; p.get_provider_info(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('airflow', 'airflow_cdc')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(result.stdout.replace("'", '"')) == [
        "airflow_cdc",
        "airflow_cdc.connection_ids",
        "airflow_cdc.provider_info",
        "airflow_cdc.settings",
    ]


def _defined(module: ModuleType, base: type) -> list[type]:
    """The public classes ``module`` defines (not imports) that are ``base``'s."""
    return [
        value
        for name, value in vars(module).items()
        if isinstance(value, type)
        and not name.startswith("_")
        and value.__module__ == module.__name__
        and issubclass(value, base)
    ]


def test_provider_info_lists_every_hook_operator_sensor_and_trigger_module() -> None:
    from airflow.sdk import BaseHook, BaseOperator, BaseSensorOperator
    from airflow.triggers.base import BaseTrigger

    info = get_provider_info()
    listed = {
        section: {m for e in info[section] for m in e["python-modules"]}
        for section in ("hooks", "operators", "sensors", "triggers")
    }
    found: dict[str, set[str]] = {section: set() for section in listed}
    # Only the Airflow face imports airflow (test_import_rules): the classes are there.
    package = REPO / "airflow_cdc"
    face = [package / f"{name}.py" for name in AIRFLOW_FACE if (package / f"{name}.py").exists()]
    face += [
        p
        for name in AIRFLOW_FACE
        if (package / name).is_dir()
        for p in (package / name).rglob("*.py")
    ]
    for path in sorted(face):
        parts = path.relative_to(REPO).with_suffix("").parts
        if any(part.startswith("_") for part in parts):
            continue
        module = importlib.import_module(".".join(parts))
        sensors = _defined(module, BaseSensorOperator)
        operators = [c for c in _defined(module, BaseOperator) if c not in sensors]
        for section, classes in (
            ("hooks", _defined(module, BaseHook)),
            ("operators", operators),
            ("sensors", sensors),
            ("triggers", _defined(module, BaseTrigger)),
        ):
            if classes:
                found[section].add(module.__name__)
    assert found == listed
    assert len(listed["operators"]) == 6


def test_provider_info_declares_the_cdc_section() -> None:
    (section,) = get_provider_info()["config"].items()
    name, body = section
    assert name == SECTION == "cdc"
    assert body["description"]
    assert list(body["options"]) == [s.key for s in SETTINGS]
    for s in SETTINGS:
        option = body["options"][s.key]
        assert option["default"] == s.default
        assert option["type"] == s.type
        assert option["description"] == s.description
        assert "{" not in s.default  # Airflow str.format()s defaults


def test_airflow_config_list_shows_every_setting_with_its_description(tmp_path: Path) -> None:
    """The real CLI, a private AIRFLOW_HOME: every key with its description, default and
    variable; a value set in airflow.cfg and one set by its variable, each from its source."""
    (tmp_path / "airflow.cfg").write_text("[cdc]\nstream_id = from_the_file\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "CDC_"))}
    env.update(
        AIRFLOW_HOME=str(tmp_path),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CDC__TABLES='["shop.from_env"]',
    )
    result = subprocess.run(
        [
            str(VENV_BIN / "airflow"),
            *("config", "list", "--section", "cdc", "--show-values"),
            *("--include-descriptions", "--include-env-vars", "--include-sources"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout[result.stdout.index("[cdc]") :]
    parts = [b.strip() for b in out.split("\n\n")[1:] if b.strip()]  # after the section's
    blocks = {b.rsplit("\n", 1)[-1].split("=")[0].strip(): b for b in parts}
    assert set(blocks) == {s.key for s in SETTINGS}, out
    for s in SETTINGS:
        block = blocks[s.key]
        assert " ".join(s.description.split()) in " ".join(block.replace("# ", "").split())
        assert f"# Variable: {s.env_var}" in block
    assert blocks["tables"].endswith('tables = ["shop.from_env"]')
    assert "# Source: env var" in blocks["tables"]
    assert blocks["stream_id"].endswith("stream_id = from_the_file")
    assert "# Source: airflow.cfg" in blocks["stream_id"]
    assert blocks["sink_path"].endswith(f"sink_path = {setting('sink_path').default}")


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
