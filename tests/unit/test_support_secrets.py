"""The secret search used by the pipeline tests finds what it must (else "no hit" proves
nothing)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.support.secrets import CommandLineWatch, files_containing


def test_a_secret_in_a_command_line_is_seen(tmp_path: Path) -> None:
    secret = "s3cr3t-for-the-watch"
    with CommandLineWatch(secret, interval=0.02) as watch:
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(0.5)", f"--password={secret}"]
        )
        child.wait()
        time.sleep(0.1)
    assert any(secret in hit for hit in watch.hits)
    assert watch.samples > 5


def test_a_secret_in_a_file_is_found(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "log.txt").write_text("x password=hunter2 y")
    (tmp_path / "clean.txt").write_text("nothing")
    assert files_containing(tmp_path, "hunter2") == [tmp_path / "a" / "b" / "log.txt"]
    assert files_containing(tmp_path, "hunter2", skip=("a",)) == []
