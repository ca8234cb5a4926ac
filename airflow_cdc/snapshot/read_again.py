"""When a chunk reads its range again (plain Python).

* A DDL statement of the chunk's table between its watermarks
  (:class:`SchemaChangedInWindowError`): the rows read may predate it, so the chunk reads
  again at once, with a new low watermark after it, up to :data:`WINDOW_RETRIES` times.
* The Delta table's columns are not the ones the chunk reads
  (:class:`SinkColumnsChangedError`): the source's columns changed and the stream has not
  carried the change over yet (it does at the statement's binlog position), or did so
  while the chunk read. The chunk looks again every :data:`COLUMNS_POLL_SECONDS` and
  reads once they agree, for ``ReadConfig.columns_wait_seconds`` at most.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from airflow_cdc.config import ReadConfig
from airflow_cdc.errors import (
    SchemaChangedError,
    SchemaChangedInWindowError,
    SinkColumnsChangedError,
)

__all__ = ["COLUMNS_POLL_SECONDS", "WINDOW_RETRIES", "reading_again"]

log = logging.getLogger("airflow_cdc.snapshot")

T = TypeVar("T")

#: How often a chunk reads again when a DDL statement of its table lands in its window.
WINDOW_RETRIES = 3
#: How often a chunk looks again whether the Delta table has the source's columns.
COLUMNS_POLL_SECONDS = 5.0
_COLUMNS_ADVICE = (
    "Is the stream running? If no stream follows the table yet (its first snapshot), its "
    "columns changed during the snapshot: snapshot it again into a replacement Delta table "
    "(mysql_cdc_backfill with replace)"
)


def reading_again(
    label: str,
    read: ReadConfig,
    snapshot: Callable[[], T],
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``snapshot()`` of the chunk ``label``, again as the module docstring says."""
    window_retries = 0
    waiting_since: float | None = None
    while True:
        try:
            return snapshot()
        except SchemaChangedInWindowError as exc:
            window_retries += 1
            if window_retries > WINDOW_RETRIES:
                raise
            log.warning("%s: %s (reading it again)", label, exc)
        except SinkColumnsChangedError as exc:
            waiting_since = clock() if waiting_since is None else waiting_since
            waited = clock() - waiting_since
            if waited >= read.columns_wait_seconds:
                raise SchemaChangedError(
                    f"{label}: {exc}. Waited {waited:.0f} s for the stream to carry "
                    f"the change of columns over (it does when it reaches the ALTER in the "
                    f"binlog). {_COLUMNS_ADVICE}"
                ) from exc
            log.warning("%s: %s (waiting for the stream, then reading again)", label, exc)
            sleep(COLUMNS_POLL_SECONDS)
