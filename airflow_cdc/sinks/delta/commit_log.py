"""The commits of a Delta table after a version, read from its log for what they add
(:func:`log_after`): the evidence :mod:`.outcome` weighs when a commit raised.

It reads the commit files themselves (``_delta_log/<version>.json``, one action a line)
through the sink's store, as a check and never to write: a listing of the log, then each
commit after the version read. A version missing in between (a log cleaned up that far,
which the retention of recent versions rules out) or a read that fails leaves the answer
unknown, never empty.
"""

from __future__ import annotations

import json
import logging
import re
from urllib.parse import unquote

import pyarrow.fs as pafs

from airflow_cdc.sinks.delta.outcome import LogAfter
from airflow_cdc.sinks.storage.storage import Location

__all__ = ["log_after"]

log = logging.getLogger(__name__)

_COMMIT_FILE = re.compile(r"(\d{20})\.json")


def log_after(location: Location, read_version: int) -> LogAfter:
    """The data files the table's commits after ``read_version`` add (see the module
    docstring); the table at ``location``."""
    filesystem, root = location.resolve()
    folder = f"{root}/_delta_log"
    try:
        versions = sorted(
            int(found.group(1))
            for info in filesystem.get_file_info(pafs.FileSelector(folder))
            if (found := _COMMIT_FILE.fullmatch(info.base_name))
            and int(found.group(1)) > read_version
        )
        if versions != list(range(read_version + 1, read_version + 1 + len(versions))):
            log.warning("%s: versions after %d missing from its log", location.uri, read_version)
            return LogAfter(None)
        added: set[str] = set()
        for version in versions:
            with filesystem.open_input_stream(f"{folder}/{version:020d}.json") as handle:
                added |= _added(handle.read().decode("utf-8"))
    except Exception as exc:  # the answer is unknown, which keeps the files
        log.warning("%s: its log after version %d unread: %r", location.uri, read_version, exc)
        return LogAfter(None)
    return LogAfter(frozenset(added))


def _added(text: str) -> set[str]:
    """The unescaped paths of one commit file's ``add`` actions."""
    actions = (json.loads(line) for line in text.splitlines() if line.strip())
    return {unquote(action["add"]["path"]) for action in actions if "add" in action}
