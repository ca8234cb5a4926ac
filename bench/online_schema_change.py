"""pt-online-schema-change adding a column to a followed table, carried over in place at the
swap, against a full re-snapshot of the same table, in one run (``make bench``; issue 45's
figure), and what a reader of the table sees during the re-snapshot.

The table: ``benchddl.t`` of ``add_column``'s shape, ``--rows`` rows (1,000,000).

* **re-snapshot** (the yardstick): as ``add_column``: the table snapshotted again into a new
  generation by the chunk job through spark-submit, its wall time; a reader polls the live
  table meanwhile (``replacement_min_rows_seen``: the fewest live rows it saw, against the
  rows the table had before; a replacement built in place would show 0).
* **in place**: the stream (reader and batch function in-process,
  ``tests/support/stream_harness.py``) follows the table while Debian's
  pt-online-schema-change runs ``ADD COLUMN color VARCHAR(10) NOT NULL DEFAULT 'red'``
  (batches run meanwhile, as a running stream's would); the time of the batch that holds
  the swap: the table's part applied in order, the shadow's change carried over in place
  (every data file rewritten with ``color = 'red'``), the commit. pt-online-schema-change's
  own copy is the source's work, not the replica's, and is not counted.

``online_schema_change_vs_resnapshot`` = in place / re-snapshot (target at most 0.1).

    .venv/bin/python bench/online_schema_change.py --rows 1000000
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from add_column import DB, REPO, _create, _resnapshot

from devtools.local_mariadb import LocalMariaDB

TARGET = 0.1


class _Reader:
    """Polls the live row count of the table (what a reader of the lake gets)."""

    def __init__(self, lake: Path) -> None:
        from airflow_cdc.model import TableId
        from airflow_cdc.sinks.delta import DeltaSink

        self.sink, self.table = DeltaSink(str(lake)), TableId(DB, "t")
        self.seen: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _Reader:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.seen.append(self.sink.read_live(self.table, ["id"]).num_rows)
            self._stop.wait(0.2)


def _pt_osc(server: LocalMariaDB, stream: Any, work: Path) -> float:
    """pt-online-schema-change under the stream; the time of the batch with the swap."""
    from airflow_cdc.model import TableId
    from airflow_cdc.sinks.delta import DeltaSink

    defaults = work / "pt-osc.cnf"
    defaults.write_text(f"[client]\nuser=root\npassword={server.root_password}\n")
    defaults.chmod(0o600)
    alter = "ADD COLUMN color VARCHAR(10) NOT NULL DEFAULT 'red'"
    tool = subprocess.Popen(
        [
            "pt-online-schema-change", "--alter", alter,
            f"F={defaults},S={server.socket_path},D={DB},t=t",
            "--execute", "--recursion-method", "none",
        ],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    while tool.poll() is None:
        stream.run_batch()  # a running stream keeps up with the copy's binlog meanwhile
    output = tool.stdout.read().decode() if tool.stdout else ""
    if tool.returncode != 0:
        raise RuntimeError(f"pt-online-schema-change failed: {output[-3000:]}")
    started = time.perf_counter()
    stream.run_batch()  # the swap: carried over in place
    seconds = time.perf_counter() - started
    values = DeltaSink(stream.spec.sink.root).read_live(TableId(DB, "t"), ["color"]).column(0)
    if values.null_count or set(values.to_pylist()) != {"red"}:
        raise RuntimeError("color is not 'red' in every row after the swap")
    return seconds


def measure_online_schema_change(server: LocalMariaDB, rows: int, workdir: Path) -> dict[str, Any]:
    """See the module docstring."""
    sys.path.insert(0, str(REPO))
    from tests.support.pipeline import stream_spec
    from tests.support.stream_harness import InProcessStream

    work = workdir / "online_schema_change"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    _create(server, rows)
    meta, lake = f"sqlite:///{work / 'meta.db'}", work / "lake"
    resnapshots = [_resnapshot(server, meta, lake, work, 0)]
    spec = stream_spec(server, [f"{DB}.t"], meta, lake, work / "checkpoint", stream_id="bench")
    stream = InProcessStream(spec, work)
    try:
        stream.run_batch()  # the table joins: its first generation takes its place
        with _Reader(lake) as reader:
            resnapshots.append(_resnapshot(server, meta, lake, work, 1))
            stream.run_batch()  # the replaced table joins anew: the new generation in place
        in_place = [_pt_osc(server, stream, work)]
    finally:
        stream.close()
        server.execute(f"DROP DATABASE IF EXISTS {DB}")
    best_resnapshot = min(resnapshots)
    return {
        "rows": rows,
        "in_place_seconds": [round(s, 2) for s in in_place],
        "resnapshot_seconds": [round(s, 2) for s in resnapshots],
        "online_schema_change_vs_resnapshot": round(min(in_place) / best_resnapshot, 3),
        "target_online_schema_change_vs_resnapshot": TARGET,
        "replacement_reads": len(reader.seen),
        "replacement_min_rows_seen": min(reader.seen) if reader.seen else None,
        "replacement_min_rows_vs_source": round(min(reader.seen) / rows, 3)
        if reader.seen
        else None,
    }


def main() -> None:
    from bench_table import bench_server

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/bench-online-schema-change"))
    args = parser.parse_args()
    with bench_server(args.workdir / "server") as server:
        print(json.dumps(measure_online_schema_change(server, args.rows, args.workdir), indent=2))


if __name__ == "__main__":
    main()
