"""Kinds and modes are enums matched exhaustively (docs/architecture.md): a member added to
one fails ``mypy --strict`` at every dispatch site that does not handle it.

Each case adds a member to one enum in a copy of ``airflow_cdc/`` and runs mypy (the
configuration ``make lint`` uses) on the copy; the baseline, the copy unchanged, passes.
The cases share one copy and one mypy cache per session, so each run after the first is
incremental (only the enum's module and what imports it are checked again).
"""

from __future__ import annotations

import enum
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from airflow_cdc.config import (
    DroppedColumns,
    NotInPlace,
    OnPurged,
    ReadEngine,
    SchemaChangeConfig,
    SinkConfig,
    SourceConfig,
    StartupMode,
    StreamJobSpec,
    StreamMode,
    choice,
)
from airflow_cdc.errors import ConfigurationError

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "airflow_cdc"
CONFIG = ROOT / "pyproject.toml"
#: A member no dispatch site handles.
ADDED = '    ADDED_FOR_THE_TEST = "added_for_the_test"\n'


@dataclass(frozen=True)
class Kind:
    """An enum: the module declaring it, its class line, and the modules that dispatch on
    it (each must then fail)."""

    module: str
    declaration: str
    dispatch: tuple[str, ...]


KINDS = {
    "MaskKind": Kind(
        "model/lake_columns.py",
        "class MaskKind(enum.Enum):",
        ("source/masking.py", "verify/canonical.py", "model/lake_columns.py"),
    ),
    "StartupMode": Kind(
        "config/startup.py",
        "class StartupMode(enum.StrEnum):",
        ("config/startup.py", "snapshot/start_plan.py"),
    ),
    "StreamMode": Kind(
        "config/stream.py", "class StreamMode(enum.StrEnum):", ("spark/stream_job.py",)
    ),
    "OnPurged": Kind("config/stream.py", "class OnPurged(enum.StrEnum):", ("config/stream.py",)),
    "DroppedColumns": Kind(
        "config/stream.py", "class DroppedColumns(enum.StrEnum):", ("config/stream.py",)
    ),
    "NotInPlace": Kind(
        "config/stream.py", "class NotInPlace(enum.StrEnum):", ("config/stream.py",)
    ),
    "ReadEngine": Kind(
        "config/snapshot.py",
        "class ReadEngine(enum.StrEnum):",
        ("snapshot/reader.py", "source/view_read.py"),
    ),
}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package (without its caches), shared by the module's cases."""
    root = tmp_path_factory.mktemp("exhaustive")
    shutil.copytree(
        ROOT / PACKAGE, root / PACKAGE, ignore=shutil.ignore_patterns("__pycache__", "dags")
    )
    return root


def mypy(root: Path) -> subprocess.CompletedProcess[str]:
    """``mypy --strict`` on the copy in ``root``, with the copy's own incremental cache."""
    command = [sys.executable, "-m", "mypy", "--strict", "--config-file", str(CONFIG)]
    command += ["--cache-dir", str(root / ".mypy_cache"), PACKAGE]
    return subprocess.run(command, cwd=root, capture_output=True, text=True, check=False)


def test_the_unchanged_copy_passes(scratch: Path) -> None:
    result = mypy(scratch)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", sorted(KINDS))
def test_a_member_added_fails_at_each_dispatch(scratch: Path, name: str) -> None:
    kind = KINDS[name]
    module = scratch / PACKAGE / kind.module
    original = module.read_text()
    assert original.count(kind.declaration) == 1, f"{kind.declaration} not in {kind.module}"
    head, tail = original.split(kind.declaration)
    module.write_text(f"{head}{kind.declaration}\n{ADDED}{tail[1:]}")
    try:
        result = mypy(scratch)
    finally:
        module.write_text(original)
    report = result.stdout + result.stderr
    assert result.returncode == 1, report
    for site in kind.dispatch:
        failing = [line for line in report.splitlines() if line.startswith(f"{PACKAGE}/{site}:")]
        assert any("assert_never" in line for line in failing), f"{site} not named:\n{report}"


def test_a_job_file_keeps_the_modes_as_written_and_reads_them_back_as_members() -> None:
    spec = StreamJobSpec(
        stream_id="s",
        tables=("shop.a",),
        source=SourceConfig(host="db"),
        metadata_url="sqlite://",
        sink=SinkConfig("/lake"),
        checkpoint_dir="/ckpt",
        mode=StreamMode.UNTIL_CAUGHT_UP,
        on_purged=OnPurged.RESNAPSHOT,
        schema_changes=SchemaChangeConfig(DroppedColumns.REMOVE, NotInPlace.STOP),
    )
    written = json.loads(json.dumps(spec.to_json()))
    assert written["mode"] == "until_caught_up"
    assert written["schema_changes"] == {"dropped_columns": "remove", "not_in_place": "stop"}
    read = StreamJobSpec.from_json(written)
    assert read == spec
    assert read.mode is StreamMode.UNTIL_CAUGHT_UP
    assert read.on_purged is OnPurged.RESNAPSHOT
    assert read.schema_changes.dropped_columns is DroppedColumns.REMOVE


@pytest.mark.parametrize("kind", [StartupMode, StreamMode, OnPurged, ReadEngine])
def test_a_text_not_a_member_is_refused_naming_the_setting_and_the_choices(
    kind: type[enum.StrEnum],
) -> None:
    assert choice("setting_x", kind, str(list(kind)[-1])) is list(kind)[-1]
    with pytest.raises(ConfigurationError) as refused:
        choice("setting_x", kind, "nonsense")
    assert str(refused.value) == (f"setting_x must be one of {', '.join(kind)}; got 'nonsense'")
