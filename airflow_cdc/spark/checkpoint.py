"""What a Structured Streaming checkpoint of the stream holds, read from its files.

Spark writes ``offsets/<n>`` when it plans batch ``n`` (a version line, the batch's
metadata, then the source's end offset as JSON: ``{"file", "pos", "seen_at"}``) and
``commits/<n>`` once the batch's function returned. A restart resumes after the newest
committed batch. Only local checkpoints are read; one on a Hadoop filesystem is left to
Spark (the stream is correct from any checkpoint, see ``stream.start``).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass

from airflow_cdc.model import BinlogPosition
from airflow_cdc.stream.slice_rows import Offset
from airflow_cdc.stream.start import checkpoint_is_stale

__all__ = ["Checkpoint", "read_checkpoint", "set_aside_if_stale"]

log = logging.getLogger("airflow_cdc.stream")


@dataclass(frozen=True)
class Checkpoint:
    """``present``: Spark has planned a batch there (it resumes from it, no start batch);
    ``resumes_at``: the end of its newest committed batch, when known."""

    folder: str | None  # None: not a local folder
    present: bool
    resumes_at: BinlogPosition | None = None


def _local_folder(checkpoint_dir: str) -> str | None:
    if "://" in checkpoint_dir and not checkpoint_dir.startswith("file:"):
        return None
    return checkpoint_dir.removeprefix("file://").removeprefix("file:")


def _numbered(folder: str) -> list[int]:
    if not os.path.isdir(folder):
        return []
    return sorted(int(name) for name in os.listdir(folder) if name.isdigit())


def read_checkpoint(checkpoint_dir: str) -> Checkpoint:
    folder = _local_folder(checkpoint_dir)
    if folder is None:
        return Checkpoint(None, present=True)
    planned = _numbered(os.path.join(folder, "offsets"))
    if not planned:
        return Checkpoint(folder, present=False)
    committed = [n for n in _numbered(os.path.join(folder, "commits")) if n in planned]
    if not committed:
        return Checkpoint(folder, present=True)
    try:
        with open(os.path.join(folder, "offsets", str(committed[-1])), encoding="utf-8") as f:
            offset = json.loads(f.read().splitlines()[-1])
        position = Offset.from_map(offset).position
    except (OSError, ValueError, KeyError, IndexError):
        log.warning("cannot read the offsets of the checkpoint %s", folder, exc_info=True)
        return Checkpoint(folder, present=True)
    return Checkpoint(folder, present=True, resumes_at=position)


def set_aside_if_stale(
    checkpoint: Checkpoint, committed: BinlogPosition | None, epoch: int = 0
) -> Checkpoint:
    """Remove a local checkpoint that stands before the stream's committed position (it
    would replay what the tables hold, or start at a purged position); the stream then
    starts from the committed position. Returns what is left."""
    if checkpoint.folder is None or not checkpoint.present:
        return checkpoint
    if not checkpoint_is_stale(checkpoint.resumes_at, committed, epoch):
        return checkpoint
    if checkpoint.resumes_at is not None and checkpoint.resumes_at.epoch < epoch:
        log.warning(
            "the checkpoint %s resumes at %s, in the binlog of the server before the source's "
            "now (epoch %d, a failover): setting it aside, the stream goes on by GTID",
            checkpoint.folder,
            checkpoint.resumes_at,
            epoch,
        )
    elif committed is None:
        log.warning(
            "the checkpoint %s resumes at %s, but the metadata DB holds no committed "
            "position of this stream (the checkpoint was written for another metadata DB): "
            "setting it aside",
            checkpoint.folder,
            checkpoint.resumes_at or "its start",
        )
    else:
        log.warning(
            "the checkpoint %s resumes at %s, before the stream's committed position %s in "
            "the metadata DB (it was written by an older run): starting from the committed "
            "position",
            checkpoint.folder,
            checkpoint.resumes_at or "its start",
            committed,
        )
    shutil.rmtree(checkpoint.folder, ignore_errors=True)
    return Checkpoint(checkpoint.folder, present=False)
