"""Reading a local Structured Streaming checkpoint of the stream (Spark's own file layout:
``offsets/<n>`` = version line, batch metadata, the source's end offset; ``commits/<n>``)
and setting aside one that the metadata DB's committed position makes stale."""

from __future__ import annotations

import json
from pathlib import Path

from airflow_cdc.model import BinlogPosition
from airflow_cdc.spark.checkpoint import read_checkpoint, set_aside_if_stale


def batch(folder: Path, number: int, end: BinlogPosition, *, committed: bool) -> None:
    (folder / "offsets").mkdir(parents=True, exist_ok=True)
    (folder / "commits").mkdir(exist_ok=True)
    metadata = {"batchWatermarkMs": 0, "batchTimestampMs": 1, "conf": {}}
    offset = {"file": end.file, "pos": end.offset, "seen_at": 1.5}
    (folder / "offsets" / str(number)).write_text(
        f"v1\n{json.dumps(metadata)}\n{json.dumps(offset)}"
    )
    (folder / "offsets" / f".{number}.crc").write_text("")
    if committed:
        (folder / "commits" / str(number)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def test_it_resumes_after_the_newest_committed_batch(tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    batch(folder, 0, BinlogPosition("b.000001", 100), committed=True)
    batch(folder, 1, BinlogPosition("b.000002", 50), committed=True)
    batch(folder, 2, BinlogPosition("b.000002", 90), committed=False)  # planned, not done
    checkpoint = read_checkpoint(str(folder))
    assert checkpoint.present
    assert checkpoint.resumes_at == BinlogPosition("b.000002", 50)
    assert read_checkpoint(f"file://{folder}").resumes_at == BinlogPosition("b.000002", 50)


def test_stale_and_foreign_checkpoints_are_set_aside_others_kept(tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    batch(folder, 0, BinlogPosition("b.000002", 50), committed=True)
    kept = set_aside_if_stale(read_checkpoint(str(folder)), BinlogPosition("b.000002", 50))
    assert kept.present
    assert folder.is_dir()
    newer = set_aside_if_stale(read_checkpoint(str(folder)), BinlogPosition("b.000001", 9))
    assert newer.present  # the metadata DB lags Spark by at most a batch
    stale = set_aside_if_stale(read_checkpoint(str(folder)), BinlogPosition("b.000003", 4))
    assert not stale.present
    assert not folder.exists()
    batch(folder, 0, BinlogPosition("b.000009", 4), committed=True)
    foreign = set_aside_if_stale(read_checkpoint(str(folder)), None)
    assert not foreign.present  # a committed batch the metadata DB does not know
    assert not folder.exists()


def test_a_checkpoint_that_committed_nothing_and_a_remote_one_are_left_to_spark(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "ckpt"
    batch(folder, 0, BinlogPosition("b.000001", 100), committed=False)
    assert set_aside_if_stale(read_checkpoint(str(folder)), None).present
    remote = read_checkpoint("hdfs://nn/ckpt")
    assert remote.present
    assert set_aside_if_stale(remote, BinlogPosition("b.000001", 1)) == remote
