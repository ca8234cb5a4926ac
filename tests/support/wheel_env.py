"""A fresh Python environment with the wheel of this checkout installed by pip's resolver
from the package index, made in the background while the other tests run (most of its
minutes are pip downloading and installing Airflow); ``tests/integration/
test_wheel_install.py`` waits for it and uses it.

:func:`start` is called once collection is done (``tests/conftest.py``) when that test is
collected; the folder is removed at the end of the session."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.support.pipeline import kill_group

__all__ = ["WheelEnv", "clean_env", "start", "started"]

REPO = Path(__file__).resolve().parents[2]

_BUILD = """
set -eu
python3.11 -m venv "$1/venv"
"$1/venv/bin/python" -m pip wheel --no-deps -q -w "$1" "$1/source"
"$1/venv/bin/python" -m pip install -q --no-compile "$1"/airflow_cdc-*.whl
"""


@dataclass
class WheelEnv:
    root: Path
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def bin(self) -> Path:
        return self.root / "venv" / "bin"

    def wait(self, timeout: float = 1800) -> None:
        """Until the environment is installed; fails with pip's output if it was not."""
        code = self.process.wait(timeout=timeout)
        assert code == 0, (
            f"building the wheel's environment failed:\n{self.log.read_text()[-4000:]}"
        )


_started: list[WheelEnv] = []


def clean_env(home: Path, venv_bin: Path | None = None) -> dict[str, str]:
    """The environment of a user's shell: nothing of this checkout's or its venv's."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AIRFLOW", "PYTHON", "CDC_", "VIRTUAL_ENV", "SPARK"))
    }
    env.update(
        {
            "HOME": str(home),
            "AIRFLOW_HOME": str(home / "airflow"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(home / "airflow" / "dags"),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        }
    )
    if venv_bin is not None:
        env["PATH"] = f"{venv_bin}{os.pathsep}{env.get('PATH', '')}"
    return env


def _source_copy(target: Path) -> None:
    """The checkout's tracked files as they are now (links kept), where a build may write
    its ``build/`` and ``*.egg-info`` without touching the checkout."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source, copy = REPO / name, target / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, copy, follow_symlinks=False)


def start() -> WheelEnv:
    """Start building the environment (once a session)."""
    if _started:
        return _started[0]
    root = Path(tempfile.mkdtemp(prefix="cdc-wheel-env-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    (root / "home").mkdir()
    _source_copy(root / "source")
    log = root / "build.log"
    with log.open("wb") as out:
        # At the lowest priority: it takes the CPU the other tests leave idle (it has until
        # its test, near the end of the session), rather than slowing them.
        process = subprocess.Popen(
            ["nice", "-n", "19", "bash", "-c", _BUILD, "build", str(root)],
            env=clean_env(root / "home"),
            cwd=root / "home",
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    atexit.register(_stop, process)
    _started.append(WheelEnv(root, process, log))
    return _started[0]


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        kill_group(process)  # pip and all it started


def started() -> WheelEnv:
    """The environment :func:`start` began (started now when it did not)."""
    return _started[0] if _started else start()


if __name__ == "__main__":  # build one by hand: python -m tests.support.wheel_env
    env = start()
    env.wait()
    print(env.root, file=sys.stderr)
