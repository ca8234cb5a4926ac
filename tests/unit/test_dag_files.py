"""``airflow-cdc dags install``: the shipped DAG files into a DAGs folder, a user's edit never
overwritten in silence."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from airflow_cdc.cli import main
from airflow_cdc.dag_files import MANIFEST, install_dags, shipped_dags
from airflow_cdc.errors import ConfigurationError

REPO = Path(__file__).resolve().parents[2]


def test_the_shipped_dags_are_the_repositorys() -> None:
    shipped = shipped_dags()
    assert shipped == {p.name: p.read_bytes() for p in (REPO / "dags").glob("*.py")}
    assert "mysql_cdc.py" in shipped


def test_install_adds_then_keeps_then_updates_what_it_wrote(tmp_path: Path) -> None:
    folder = tmp_path / "dags"
    assert {d.action for d in install_dags(folder)} == {"added"}
    assert {d.action for d in install_dags(folder)} == {"unchanged"}
    # An older release's file (what the command wrote then): updated without --force.
    (folder / "mysql_cdc.py").write_text("# an older release\n")
    manifest = (folder / MANIFEST).read_text()
    written = json.loads(manifest)
    written["mysql_cdc.py"] = hashlib.sha256(b"# an older release\n").hexdigest()
    (folder / MANIFEST).write_text(json.dumps(written))
    actions = {d.path.name: d.action for d in install_dags(folder)}
    assert actions["mysql_cdc.py"] == "updated"
    assert (folder / "mysql_cdc.py").read_bytes() == shipped_dags()["mysql_cdc.py"]


def test_a_users_edit_is_refused_before_anything_is_written_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "dags"
    install_dags(folder)
    edited = folder / "mysql_cdc_verify.py"
    edited.write_text(edited.read_text() + "# mine\n")
    (folder / "mysql_cdc.py").unlink()
    with pytest.raises(ConfigurationError, match=r"mysql_cdc_verify\.py differ"):
        install_dags(folder)
    assert not (folder / "mysql_cdc.py").exists()  # nothing written
    assert main(["dags", "install", "--folder", str(folder)]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["dags", "install", "--folder", str(folder), "--force"]) == 0
    assert "replaced" in capsys.readouterr().out
    assert edited.read_bytes() == shipped_dags()["mysql_cdc_verify.py"]
