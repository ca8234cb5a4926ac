"""The DAG files the package ships (``airflow_cdc/dags``: the repository's ``dags/``), put
into an Airflow DAGs folder by ``airflow-cdc dags install``.

They are copied, not imported from the package: Airflow records each DAG with the file that
defined it, relative to its DAGs folder (its bundle), so a DAG must live there. The folder's
``.airflow_cdc_dags.json`` records what the command wrote (each file's SHA-256), so a later
release's install updates those files; a file that differs from what it wrote (a user's
edit, or a file of the same name) is replaced only with ``force``, never in silence.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from airflow_cdc.errors import ConfigurationError

__all__ = ["MANIFEST", "InstalledDag", "install_dags", "shipped_dags"]

#: What the command wrote into a folder (not a ``.py`` file: Airflow does not parse it).
MANIFEST = ".airflow_cdc_dags.json"

#: A file of the shipped folder that is no DAG.
_NOT_DAGS = frozenset({"__init__.py"})


@dataclass(frozen=True, slots=True)
class InstalledDag:
    """One DAG file and what ``install_dags`` did with it: ``added``, ``updated``
    (replaced a shipped version), ``unchanged``, or ``replaced`` (a file of the user's,
    with ``force``)."""

    path: Path
    action: str


def shipped_dags() -> dict[str, bytes]:
    """The shipped DAG files by name, with their contents."""
    folder = resources.files("airflow_cdc").joinpath("dags")
    return {
        entry.name: entry.read_bytes()
        for entry in folder.iterdir()
        if entry.name.endswith(".py") and entry.name not in _NOT_DAGS
    }


def install_dags(folder: Path, *, force: bool = False) -> list[InstalledDag]:
    """Copy the shipped DAG files into ``folder`` (made if missing); refuses, before
    writing anything, a file that differs from both the shipped one and what an earlier
    install wrote (unless ``force``)."""
    shipped = shipped_dags()
    folder.mkdir(parents=True, exist_ok=True)
    manifest = folder / MANIFEST
    written: dict[str, str] = json.loads(manifest.read_text()) if manifest.exists() else {}
    plan: list[tuple[Path, bytes, str]] = []
    edited: list[str] = []
    for name, content in sorted(shipped.items()):
        target = folder / name
        if not target.exists():
            plan.append((target, content, "added"))
            continue
        current = target.read_bytes()
        ours = written.get(name) == _digest(current)
        if current == content:
            plan.append((target, content, "unchanged"))
        elif ours or force:
            plan.append((target, content, "updated" if ours else "replaced"))
        else:
            edited.append(str(target))
    if edited:
        raise ConfigurationError(
            f"{', '.join(edited)} differ from the DAG files of this release and from what "
            "airflow-cdc wrote there: keep your changes elsewhere (a DAG of your own, see the "
            "user guide's 'The operators in a DAG of your own'), or run again with --force "
            "to replace them"
        )
    for target, content, action in plan:
        if action != "unchanged":
            target.write_bytes(content)
        written[target.name] = _digest(content)
    manifest.write_text(json.dumps(written, indent=2, sort_keys=True) + "\n")
    return [InstalledDag(target, action) for target, _, action in plan]


def _digest(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()
