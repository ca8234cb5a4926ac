"""Write ``docs/benchmarks.md`` and ``docs/benchmarks.png`` from ``bench/results.json``.

The page holds the headline figures against their targets, the per-size figures of every
section (so the cost per row can be seen to stay flat), the machine and how to reproduce.
The plot shows throughput against size for the product and its yardsticks: the snapshot
(rows/s), the stream (changes/s) and the planner (ms per chunk).

    .venv/bin/python bench/report.py [--results bench/results.json] [--docs docs]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent

#: Headline figures: (key, what it is, direction: ">=" higher is better, "<=" lower is better).
HEADLINES: tuple[tuple[str, str, str], ...] = (
    (
        "snapshot_vs_cli",
        "chunk job rows/s, steady state ÷ `mariadb --quick` rows/s (one connection)",
        ">=",
    ),
    ("snapshot_vs_spark_jdbc", "chunk job rows/s, steady state ÷ Spark JDBC → Parquet", ">="),
    ("cold_snapshot_vs_cli", "chunk job rows/s, a fresh JVM's first chunk ÷ CLI", ">="),
    ("cold_snapshot_vs_spark_jdbc", "chunk job rows/s, fresh JVM ÷ Spark JDBC → Parquet", ">="),
    ("end_to_end_vs_cli", "rows/s through Airflow (plan → all chunks in Delta) ÷ CLI", ">="),
    ("stream_vs_single_decoder", "stream changes/s ÷ one mysql-replication decoder", ">="),
    (
        "stream_vs_mariadb_binlog",
        "stream changes/s ÷ `mariadb-binlog -vv` changes/s, the smallest of three workloads "
        "(single-row INSERTs, 1,000-row UPDATEs, wide single-row INSERTs)",
        ">=",
    ),
    (
        "big_transaction_speedup_2_cores",
        "one UPDATE of 1,000,000 rows: stream batch time on 1 core ÷ on 2",
        ">=",
    ),
    ("stream_latency_p99_s", "commit → visible in Delta, p99 (s)", "<="),
    ("handoff_gap_s", "last chunk done → first stream batch committed (s)", "<="),
    ("plan_ms_per_chunk", "planning an uneven string-key split, ms per chunk", "<="),
    (
        "many_tables_vs_one_table",
        "300 tables × 2,000 rows ÷ one table of 600,000, through Airflow (start → first batch)",
        "<=",
    ),
    (
        "many_tables_stream_p99_vs_one_table",
        "commit → its table's Delta commit, p99, 2,000 changes/s over 300 tables ÷ the same "
        "into one table (a stream of its own, same run)",
        "<=",
    ),
    (
        "many_tables_decode_vs_one_table",
        "one slice's decoded changes/s over 300 tables ÷ over one table, same one-row changes "
        "(in-process, `bench/many_tables_profile.py`)",
        ">=",
    ),
    (
        "add_column_vs_resnapshot",
        "ADD COLUMN ... NOT NULL DEFAULT on 1M rows, in place ÷ a full re-snapshot",
        "<=",
    ),
    (
        "online_schema_change_vs_resnapshot",
        "pt-online-schema-change's ADD COLUMN on 1M rows, in place at the swap ÷ a full re-snapshot",
        "<=",
    ),
    (
        "verify_vs_cli",
        "verify of a whole table (source and lake summed, compared) ÷ one `mariadb --quick` read",
        "<=",
    ),
    (
        "keyless_snapshot_vs_keyed",
        "snapshot of a table without a key (a multiset, 5% duplicate rows) ÷ the same rows "
        "with a primary key, seconds (lower is better)",
        "<=",
    ),
    (
        "keyless_stream_vs_keyed",
        "the same one-row changes streamed into a table without a key ÷ into the same rows "
        "with a primary key, seconds (lower is better)",
        "<=",
    ),
    (
        "masks_stream_vs_plain",
        "the same one-row changes streamed with a column left out, one hashed, one "
        "truncated and the change metadata columns ÷ without, changes/s (in-process, "
        "`bench/masks_stream.py`)",
        ">=",
    ),
    (
        "hashed_key_snapshot_vs_plain",
        "a table keyed by an email, its key hashed in the lake (every chunk a merge), "
        "snapshotted against the same rows with the key as it is, the plain one's seconds "
        "÷ the hashed one's (in-process, `bench/hashed_keys.py`; informational)",
        ">=",
    ),
    (
        "hashed_key_stream_vs_plain",
        "the same one-row changes streamed into both, the plain stream's seconds ÷ the "
        "hashed one's (informational)",
        ">=",
    ),
    (
        "routed_snapshot_vs_own_tables",
        "sixteen shards with overlapping keys snapshotted into one Delta table (`routes`) "
        "÷ into a table each, seconds (in-process, `bench/routed_snapshot.py`; lower is "
        "better)",
        "<=",
    ),
)

#: Targets not carried by the results (a section may report ``target_<key>`` itself).
TARGETS: dict[str, float | None] = {
    "snapshot_vs_cli": 0.5,
    "snapshot_vs_spark_jdbc": 1.5,
    "end_to_end_vs_cli": 0.25,
    "stream_vs_single_decoder": 1.7,
    "stream_vs_mariadb_binlog": 0.25,
    "big_transaction_speedup_2_cores": 1.8,
    "stream_latency_p99_s": 5.0,
    "handoff_gap_s": 30.0,
    "many_tables_vs_one_table": 2.0,
    "many_tables_stream_p99_vs_one_table": 2.0,
    "many_tables_decode_vs_one_table": 0.7,
    "add_column_vs_resnapshot": 0.1,
    "online_schema_change_vs_resnapshot": 0.1,
    "verify_vs_cli": 2.0,
    "keyless_snapshot_vs_keyed": 2.0,
    "keyless_stream_vs_keyed": 2.0,
    "masks_stream_vs_plain": 0.8,
    "hashed_key_snapshot_vs_plain": None,
    "hashed_key_stream_vs_plain": None,
    "routed_snapshot_vs_own_tables": 1.5,
}

REPRODUCE = """\
```bash
make bench                                              # set up, then bench/run_all.py
.venv/bin/python bench/run_all.py --sizes 100000,200000  # a quick check (a few minutes)
.venv/bin/python bench/report.py                        # redraw this page from results.json
```

`bench/run_all.py` starts one private MariaDB (the tests' settings, with a 4 GB InnoDB
buffer pool that holds every table of the run, as a production server is sized for its
working set), and for each size creates (or grows)
`bench.t` and runs side by side: the `mariadb --quick --batch` CLI read (one connection),
Spark's JDBC source into Parquet (`spark-submit --master local[2]`, Debian's MariaDB
Connector/J, 4 partitions; only the action is timed, after a warm-up job on the first 50,000
keys; the JVM start is reported beside it) and the product's chunk job (`spark-submit` of
`bench/chunk_job_app.py`, `read_paths.measure_snapshot`; its own time, from after its Spark
context is up until the chunk is in Delta and recorded, JVM start and stop excluded). The
chunk job runs twice in its JVM, on two plans of the same rows into two empty lakes: first
as one Airflow task runs it (its executors' Python workers start during it: *fresh JVM*,
"cold"), then again with the workers up (*steady state*, the figure compared with Spark
JDBC's action after its warm-up). Spark JDBC and the chunk job
run twice each, alternating, and the faster run of each is compared (both rates are in
`runs_rows_per_s`); then the planner on a
string-key table grown to each size (`bench/plan.py`), the end-to-end run through Airflow
(`bench/end_to_end.py`) and the stream (`bench/stream.py`). Everything it measured,
per size and per stage, is in `bench/results.json`; this page is drawn from it by
`bench/report.py`. The machine is shared and noisy: compare figures of the same run only."""


# -- helpers ----------------------------------------------------------------------------------


def _num(value: Any, digits: int = 3) -> str:
    """A figure for a table cell."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int) or (isinstance(value, float) and abs(value) >= 1000):
        return f"{value:,.0f}"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1 else f"{value:,.{digits - 1}f}"
    return str(value)


def _table(header: Iterable[str], rows: Iterable[Iterable[Any]]) -> list[str]:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_num(cell) for cell in row) + " |" for row in rows]
    return lines


def _sizes(section: dict[str, Any] | None) -> list[int]:
    """The sizes (numeric keys) a per-size section holds, ascending."""
    return sorted(int(k) for k in (section or {}) if str(k).isdigit())


def _get(figures: dict[str, Any] | None, *keys: str) -> Any:
    """The first of ``keys`` present in ``figures``."""
    for key in keys:
        if figures and figures.get(key) is not None:
            return figures[key]
    return None


def target_of(results: dict[str, Any], key: str) -> float | None:
    """The target of a headline: from ``results['targets']``, else :data:`TARGETS`."""
    targets = results.get("targets") or {}
    if targets.get(key) is not None:
        return float(targets[key])
    return TARGETS.get(key)


def verdict(value: Any, target: float | None, direction: str) -> str:
    """``pass``/``FAIL``, or why neither."""
    if value is None:
        return "not measured"
    if target is None:
        return "no target"
    ok = value >= target if direction == ">=" else value <= target
    return "pass" if ok else "FAIL"


# -- the page ---------------------------------------------------------------------------------


def headline_lines(results: dict[str, Any]) -> list[str]:
    """The table of headline figures with targets and verdicts."""
    rows = []
    at = results.get("headline_size") or {}
    for key, what, direction in HEADLINES:
        value = results.get(key)
        target = target_of(results, key)
        rows.append(
            [
                f"`{key}`",
                what,
                value,
                "–" if target is None else f"{direction} {_num(target)}",
                verdict(value, target, direction),
                at.get(key),
            ]
        )
    return _table(["figure", "what", "value", "target", "", "at size"], rows)


def snapshot_lines(raw: dict[str, Any]) -> list[str]:
    """Per-size snapshot figures: yardsticks and product, rows/s and ratios."""
    section = raw.get("snapshot") or {}
    rows = []
    for size in _sizes(section):
        figures = section[str(size)]
        cli, jdbc, product = (figures.get(k) or {} for k in ("cli", "spark_jdbc", "product"))
        rows.append(
            [
                size,
                cli.get("rows_per_s"),
                jdbc.get("rows_per_s"),
                jdbc.get("noop_rows_per_s"),
                jdbc.get("submit_seconds"),
                _get(product, "chunk_job_rows_per_s"),
                figures.get("snapshot_vs_cli"),
                figures.get("snapshot_vs_spark_jdbc"),
                _get(product, "cold_chunk_job_rows_per_s"),
                figures.get("cold_snapshot_vs_cli"),
                figures.get("cold_snapshot_vs_spark_jdbc"),
                _get(product, "peak_rss_mb"),
                cli.get("us_per_row"),
                figures.get("chunk_job_us_per_row"),
            ]
        )
    header = [
        "rows",
        "CLI rows/s",
        "Spark JDBC→Parquet rows/s",
        "Spark JDBC→noop rows/s",
        "spark-submit s",
        "chunk job rows/s",
        "vs CLI",
        "vs Spark JDBC",
        "cold chunk job rows/s",
        "cold vs CLI",
        "cold vs Spark JDBC",
        "peak RSS MB",
        "CLI µs/row",
        "chunk job µs/row",
    ]
    return _table(header, rows)


def memory_lines(section: dict[str, Any]) -> list[str]:
    """One row per big-transaction run: size, bounds, merges, peak memory by role."""
    rows = []
    for figures in section.values():
        if not figures or "transaction_rows" not in figures:
            continue
        roles = figures.get("peak_pss_mb_by_role") or {}
        rows.append(
            [
                figures["transaction_rows"],
                figures.get("block_rows"),
                figures.get("max_merge_rows"),
                figures.get("merges"),
                figures.get("peak_pss_mb"),
                roles.get("jvm"),
                roles.get("driver"),
                roles.get("workers"),
                figures.get("batch_seconds"),
            ]
        )
    header = [
        "transaction rows",
        "block_rows",
        "max_merge_rows",
        "merges",
        "peak PSS MB",
        "JVM",
        "driver",
        "workers",
        "batch s",
    ]
    return _table(header, rows)


#: The workloads of ``bench/stream_workloads.py``, in the order they are shown.
WORKLOADS = ("inserts", "updates", "wide")


def workload_lines(section: dict[str, Any]) -> list[str]:
    """Per backlog size and workload: mariadb-binlog, one decoder and the stream, changes/s
    and the stream's ratios to each (a failed workload shows as –)."""
    rows = []
    for size in _sizes(section):
        for workload in WORKLOADS:
            f = (section[str(size)] or {}).get(workload) or {}
            rows.append(
                [
                    size,
                    workload,
                    f.get("changes"),
                    None if f.get("binlog_bytes") is None else f["binlog_bytes"] / 2**20,
                    f.get("mariadb_binlog_changes_per_s"),
                    f.get("single_decoder_changes_per_s"),
                    f.get("stream_changes_per_s"),
                    f.get("stream_vs_mariadb_binlog"),
                    f.get("stream_vs_single_decoder"),
                    f.get("stream_seconds"),
                    f.get("batches"),
                ]
            )
    header = [
        "changes",
        "workload",
        "row changes",
        "binlog MB",
        "mariadb-binlog changes/s",
        "one decoder changes/s",
        "stream changes/s",
        "stream ÷ mariadb-binlog",
        "stream ÷ decoder",
        "stream s",
        "batches",
    ]
    return _table(header, rows)


def cores_lines(section: dict[str, Any]) -> list[str]:
    """The big transaction on one core and on two, and the speed-up the machine's CPU left
    room for (``bench/machine_cpu.py``)."""
    rows = [
        [
            f.get("transaction_rows"),
            None if f.get("binlog_bytes") is None else f["binlog_bytes"] / 2**20,
            f.get("seconds_1_core"),
            f.get("seconds_2_cores"),
            f.get("slices_2_cores"),
            f.get("big_transaction_speedup_2_cores"),
            " / ".join(str(p.get("speedup")) for p in f.get("pairs") or []) or None,
            f.get("speedup_bound_2_cores"),
            f.get("first_batch_seconds_1_core"),
            f.get("first_batch_seconds_2_cores"),
            f.get("first_batch_speedup_2_cores"),
        ]
        for f in section.values()
        if f
    ]
    header = [
        "UPDATE rows",
        "binlog MB",
        "steady: 1 core s",
        "2 cores s",
        "slices",
        "speed-up",
        "pairs",
        "bound: machine CPU",
        "first batch: 1 core s",
        "2 cores s",
        "speed-up",
    ]
    return _table(header, rows)


def plan_lines(raw: dict[str, Any]) -> list[str]:
    """Per-size planning figures."""
    section = (raw.get("plan") or {}).get("sizes") or {}
    rows = []
    for size in _sizes(section):
        f = section[str(size)]
        per_seek = f.get("per_seek") or {}
        rows.append(
            [
                size,
                f.get("method"),
                f.get("chunks"),
                f.get("plan_seconds"),
                f.get("plan_ms_per_chunk"),
                f.get("plan_us_per_row"),
                f"{f.get('chunk_rows_min')}–{f.get('chunk_rows_max')}",
                f.get("statements"),
                per_seek.get("Handler_read_key"),
                per_seek.get("Handler_read_next"),
                per_seek.get("Handler_tmp_write"),
            ]
        )
    header = [
        "rows",
        "method",
        "chunks",
        "plan s",
        "ms/chunk",
        "µs/row",
        "rows per chunk (min–max)",
        "SELECTs",
        "read_key/seek",
        "read_next/seek",
        "tmp_write/seek",
    ]
    return _table(header, rows)


def generic_lines(section: dict[str, Any] | None, keys: Iterable[str]) -> list[str]:
    """Per-size table of chosen scalar keys of a section (missing keys shown as –)."""
    keys = list(keys)
    rows = [[size, *(section[str(size)].get(k) for k in keys)] for size in _sizes(section)]
    return _table(["size", *keys], rows)


def object_store_lines(section: dict[str, Any]) -> list[str]:
    """Local disk against the object store, for the chunk job and the stream."""
    chunk = section.get("chunk_job") or {}
    stream = section.get("stream") or {}
    return _table(
        ("job", "work", "local disk", "S3", "S3 ÷ local"),
        [
            (
                "chunk job (steady state)",
                f"{chunk.get('rows', 0):,} rows",
                f"{_num(chunk.get('local_rows_per_s'))} rows/s",
                f"{_num(chunk.get('s3_rows_per_s'))} rows/s",
                chunk.get("s3_vs_local"),
            ),
            (
                "stream (Spark slices)",
                f"{stream.get('changes', 0):,} changes",
                f"{_num(max(stream.get('local_changes_per_s') or [0]))} changes/s",
                f"{_num(max(stream.get('s3_changes_per_s') or [0]))} changes/s",
                stream.get("s3_vs_local"),
            ),
        ],
    )


def add_column_lines(section: dict[str, Any]) -> list[str]:
    """A change of columns in place against a re-snapshot of the table."""
    rows = [
        (
            f"{figures.get('rows'):,}",
            " / ".join(f"{s} s" for s in figures.get("in_place_seconds") or []),
            " / ".join(f"{s} s" for s in figures.get("resnapshot_seconds") or []),
            figures.get("add_column_vs_resnapshot"),
        )
        for figures in section.values()
    ]
    return _table(
        ("rows", "in place (the stream's batch)", "re-snapshot (spark-submit)", "ratio"), rows
    )


def online_schema_change_lines(section: dict[str, Any]) -> list[str]:
    """pt-online-schema-change's swap in place against a re-snapshot, and the reader."""
    rows = [
        (
            f"{figures.get('rows'):,}",
            " / ".join(f"{s} s" for s in figures.get("in_place_seconds") or []),
            " / ".join(f"{s} s" for s in figures.get("resnapshot_seconds") or []),
            figures.get("online_schema_change_vs_resnapshot"),
            f"{figures.get('replacement_min_rows_vs_source')} "
            f"({figures.get('replacement_reads')} reads)",
        )
        for figures in section.values()
    ]
    return _table(
        (
            "rows",
            "in place (the batch with the swap)",
            "re-snapshot (spark-submit)",
            "ratio",
            "fewest rows a reader saw ÷ rows",
        ),
        rows,
    )


def verify_lines(section: dict[str, Any]) -> list[str]:
    """Verify against one CLI read of the table, and within a rows-per-second bound."""
    rows = [
        (
            f"{figures.get('rows'):,}",
            " / ".join(f"{s} s" for s in figures.get("cli_seconds") or []),
            " / ".join(f"{s} s" for s in figures.get("verify_seconds") or []),
            figures.get("verify_vs_cli"),
            f"{_num(figures.get('bound_rows_per_s'))} → {_num(figures.get('bounded_rows_per_s'))}",
        )
        for figures in section.values()
    ]
    return _table(("rows", "`mariadb --quick`", "verify", "ratio", "bound → observed rows/s"), rows)


def keyless_snapshot_lines(section: dict[str, Any]) -> list[str]:
    """A keyless table's snapshot against the keyed one, and the keyless read's parts."""
    rows = []
    for figures in section.values():
        keyed, keyless = figures.get("keyed") or {}, figures.get("keyless") or {}
        parts = figures.get("keyless_read_parts") or {}
        rows.append(
            (
                f"{figures.get('rows'):,}",
                " / ".join(f"{s} s" for s in keyed.get("runs_seconds") or []),
                " / ".join(f"{s} s" for s in keyless.get("runs_seconds") or []),
                f"{_num(keyed.get('rows_per_s'))} / {_num(keyless.get('rows_per_s'))}",
                figures.get("keyless_snapshot_vs_keyed"),
                f"{keyless.get('read_seconds')} / {keyless.get('correct_seconds')} / "
                f"{keyless.get('write_seconds')} s",
                f"{parts.get('view_read_seconds')} / {parts.get('image_hashes_seconds')} / "
                f"{parts.get('count_images_seconds')} s",
            )
        )
    return _table(
        (
            "rows",
            "keyed",
            "keyless",
            "rows/s keyed / keyless",
            "ratio",
            "keyless read / correct / write",
            "one core: view read / hashes / count_images",
        ),
        rows,
    )


def masks_stream_lines(section: dict[str, Any]) -> list[str]:
    """The same changes streamed with and without masks."""
    rows = []
    for figures in section.values():
        seconds = figures.get("stream_seconds") or {}
        rate = figures.get("changes_per_second") or {}
        rows.append(
            (
                f"{figures.get('rows'):,} / {_num(figures.get('changes_per_table'))}",
                f"{seconds.get('plain')} s ({_num(rate.get('plain'))}/s)",
                f"{seconds.get('masked')} s ({_num(rate.get('masked'))}/s)",
                figures.get("masks_stream_vs_plain"),
            )
        )
    return _table(("rows / changes", "plain (runs)", "masked (runs)", "ratio"), rows)


def hashed_keys_lines(section: dict[str, Any]) -> list[str]:
    """A table keyed by hash against the same rows keyed as they are."""
    rows = []
    for figures in section.values():
        seconds = figures.get("snapshot_seconds") or {}
        streams = figures.get("stream_seconds") or {}
        rows.append(
            (
                f"{figures.get('rows'):,} / {_num(figures.get('chunk_rows'))} / "
                f"{_num(figures.get('changes_per_table'))}",
                f"{seconds.get('plain')} s, {streams.get('plain')} s",
                f"{seconds.get('hashed')} s, {streams.get('hashed')} s",
                figures.get("hashed_key_snapshot_vs_plain"),
                figures.get("hashed_key_stream_vs_plain"),
            )
        )
    header = (
        "rows / chunk rows / changes",
        "plain: snapshot, stream (runs)",
        "hashed: snapshot, stream (runs)",
        "snapshot ratio",
        "stream ratio",
    )
    return _table(header, rows)


def routed_snapshot_lines(section: dict[str, Any]) -> list[str]:
    """Sharded tables snapshotted into one table and into a table each."""
    rows = []
    for figures in section.values():
        seconds = figures.get("seconds") or {}
        rows.append(
            (
                f"{figures.get('shards')} x {_num(figures.get('rows_per_shard'))}",
                f"{seconds.get('own_tables')} s",
                f"{seconds.get('routed')} s",
                figures.get("routed_snapshot_vs_own_tables"),
            )
        )
    return _table(("shards x rows", "a table each (runs)", "routed (runs)", "ratio"), rows)


#: The keyless stream's parts (``keyless_stream.Parts``) as the report names them.
KEYLESS_STREAM_PARTS = (
    ("slice.halves", "slices: halves"),
    ("slice.halves.column_array", "of which columns decoded"),
    ("slice.halves.image_hashes", "and hashes"),
    ("fold_halves_blocks", "driver: fold of the blocks"),
    ("read_blocks", "of which blocks read"),
    ("floors", "floors"),
    ("counts_of", "`counts_of` (every file)"),
    ("fold", "fold"),
    ("sink_apply", "`Sink.apply`"),
    ("binlog_reread", "binlog re-read in the driver (a table set aside)"),
)


def keyless_stream_lines(section: dict[str, Any]) -> list[str]:
    """The same changes streamed into a keyless and a keyed table, and the keyless
    stream's parts."""
    rows = []
    for figures in section.values():
        keyed, keyless = figures.get("keyed") or {}, figures.get("keyless") or {}
        parts = (keyless.get("parts") or {}).get("seconds") or {}
        rows.append(
            (
                f"{figures.get('rows'):,} / {_num((keyless.get('made') or {}).get('rows_changed'))}",
                f"{keyed.get('seconds')} s ({_num(keyed.get('changes_per_s'))}/s)",
                f"{keyless.get('seconds')} s ({_num(keyless.get('changes_per_s'))}/s)",
                figures.get("keyless_stream_vs_keyed"),
                f"{keyed.get('slices_read_seconds')} / {keyed.get('batch_function_seconds')} s",
                f"{keyless.get('slices_read_seconds')} / {keyless.get('batch_function_seconds')} s",
                "; ".join(
                    f"{label} {parts[name]} s"
                    for name, label in KEYLESS_STREAM_PARTS
                    if name in parts
                ),
            )
        )
    return _table(
        (
            "rows / changes",
            "keyed",
            "keyless",
            "ratio",
            "keyed slices / batch function",
            "keyless slices / batch function",
            "keyless stream's parts",
        ),
        rows,
    )


def many_tables_lines(section: dict[str, Any]) -> list[str]:
    """Many tables against one, and the stream's latency over many tables."""
    rows = []
    for figures in section.values():
        one, many = figures.get("one_table") or {}, figures.get("many_tables") or {}
        rows.append(
            (
                f"{figures.get('tables')} × {figures.get('rows_per_table'):,}",
                f"{one.get('seconds_to_first_batch')} s ({one.get('snapshot_tasks')} task(s))",
                f"{many.get('seconds_to_first_batch')} s ({many.get('snapshot_tasks')} task(s))",
                figures.get("many_tables_vs_one_table"),
                figures.get("many_tables_stream_p50_s"),
                figures.get("many_tables_stream_p99_s"),
                figures.get("one_table_stream_p99_s"),
                figures.get("many_tables_stream_p99_vs_one_table"),
                figures.get("many_tables_stream_batch_end_p99_s"),
                figures.get("latency_batch_seconds_mean"),
                f"{figures.get('small_merge_ms_per_table_merge')} / "
                f"{figures.get('small_merge_ms_per_table_rewrite')} ms "
                f"({figures.get('small_merge_speedup')}×)",
            )
        )
    return _table(
        (
            "tables × rows",
            "one table: start → first batch",
            "many tables",
            "many ÷ one",
            "latency p50 (s)",
            "p99 (s)",
            "one table's p99 (s)",
            "p99 ÷ one table's",
            "p99 to batch end (s)",
            "batch (s)",
            "sink per table: MERGE / rewrite",
        ),
        rows,
    )


def many_tables_profile_lines(section: dict[str, Any]) -> list[str]:
    """One batch's slice and merge over many tables against one table (timed round)."""
    rows = []
    for figures in section.values():
        for name in ("one", "many"):
            timed = (figures.get(name) or {}).get("timed") or {}
            rows.append(
                (
                    f"{name} ({(figures.get(name) or {}).get('tables')} table(s))",
                    f"{_num(timed.get('changes'))}",
                    f"{timed.get('plan_seconds')} s",
                    f"{timed.get('decode_seconds')} s ({_num(timed.get('decode_changes_per_s'))}/s)",
                    f"{timed.get('merge_seconds')} s ({timed.get('merge_ms_per_table')} ms a table)",
                )
            )
        few = (figures.get("many") or {}).get("few") or {}
        if few:
            rows.append(
                (
                    f"many, changes on {few.get('tables_changed')} tables",
                    f"{_num(few.get('changes'))}",
                    f"{few.get('plan_seconds')} s",
                    f"{few.get('decode_seconds')} s ({_num(few.get('decode_changes_per_s'))}/s)",
                    f"{few.get('merge_seconds')} s ({few.get('merge_ms_per_table')} ms a table)",
                )
            )
    return _table(
        ("workload", "changes", "plan", "one slice's decode", "merge (batch function)"), rows
    )


def machine_lines(results: dict[str, Any]) -> list[str]:
    machine = results.get("machine") or {}
    return [f"- {key}: {value}" for key, value in machine.items()]


def status_lines(results: dict[str, Any]) -> list[str]:
    """One line per section that did not run or failed."""
    lines = []
    for name, status in (results.get("sections") or {}).items():
        if status != "ok":
            lines.append(f"- `{name}`: {status}")
    return lines


def stage_lines(results: dict[str, Any]) -> list[str]:
    stages = results.get("stage_seconds") or {}
    return _table(["stage", "wall s"], [[f"`{k}`", v] for k, v in stages.items()])


def render_markdown(results: dict[str, Any], png_name: str) -> str:
    """The whole page."""
    raw = results.get("raw") or {}
    parts = [
        "# Benchmarks",
        "",
        "Generated by `bench/report.py` from `bench/results.json` "
        f"({results.get('machine', {}).get('date', '?')}, sizes "
        f"{', '.join(f'{s:,}' for s in results.get('sizes', []))}). "
        "Every yardstick is measured in the same run, on the same machine and data, as the "
        "product it is compared with.",
        "",
        "## Headline",
        "",
        *headline_lines(results),
        "",
        "Ratios and times are those of the largest size measured; every size is below.",
        "",
    ]
    problems = status_lines(results)
    if problems:
        parts += ["Sections not measured in this run:", "", *problems, ""]
    parts += [
        f"![throughput against size]({png_name})",
        "",
        "## Snapshot: one table read into the lake, per size",
        "",
        "Row shape of the yardsticks (~132 B: bigint key, int, varchar(16), decimal(12,2), "
        "varchar(200) of ~60 chars, datetime(6), timestamp(6)); CLI and Spark JDBC read over "
        "TCP on 127.0.0.1. Spark JDBC rows/s count only the action (read + write), not the "
        "`spark-submit` wall time (column `spark-submit s`).",
        "",
        *snapshot_lines(raw),
        "",
        "## Planning: uneven split of a string key, per size",
        "",
        "`benchplan.k`: `VARCHAR(64)` primary key, 60% under one prefix, 30% over 97 "
        "prefixes, 10% out of order. Counters are the planner session's `Com_select` and "
        "`Handler_*` deltas; a seek is one boundary (plus the last, which finds the end). "
        "Each seek walks one chunk of the clustered index, so its cost depends on whether "
        "those pages are in the buffer pool: with a 512 MB pool (smaller than the 5M-row "
        "table) one chunk took 84 ms at 5M rows against 25 ms at 1M; with the run's pool, "
        "20 ms at 5M (`bench_table.BUFFER_POOL`).",
        "",
        *plan_lines(raw),
        "",
    ]
    if raw.get("end_to_end"):
        parts += [
            "## End to end through Airflow, per size",
            "",
            *generic_lines(
                raw["end_to_end"],
                (
                    "cli_rows_per_s",
                    "end_to_end_rows_per_s",
                    "end_to_end_vs_cli",
                    "snapshot_seconds",
                    "chunks",
                    "handoff_gap_seconds",
                ),
            ),
            "",
        ]
    if raw.get("stream"):
        parts += [
            "## Stream, per backlog size (changes)",
            "",
            *generic_lines(
                raw["stream"],
                (
                    "single_decoder_changes_per_s",
                    "stream_changes_per_s",
                    "stream_vs_single_decoder",
                    "stream_seconds",
                    "batches",
                    "slices_per_batch",
                    "binlog_bytes",
                    "stream_latency_p50_s",
                    "stream_latency_p99_s",
                    "stream_latency_max_s",
                ),
            ),
            "",
        ]
    if raw.get("stream_workloads") or raw.get("stream_cores"):
        parts += [
            "## Stream per kind of change, against mariadb-binlog",
            "",
            "`bench/stream_workloads.py`: per backlog size, three workloads each on a fresh",
            "snapshotted table; on each one's binlog range `mariadb-binlog",
            "--read-from-remote-server --base64-output=decode-rows -vv` (MariaDB's own",
            "reader, every value of every row printed: the bound), one mysql-replication",
            "decoder and the stream (local[2], from its first batch's start to its last",
            "batch's end). `inserts`: single-row INSERT transactions into the benchmark",
            "table's row shape; `updates`: 1,000-row UPDATE transactions; `wide`: single-row",
            "INSERTs of a BIGINT key, 300-char TEXT, JSON object, DECIMAL(20,6), DATETIME(6).",
            "",
            *workload_lines(raw.get("stream_workloads") or {}),
            "",
            "One UPDATE of every row of a table as one transaction, streamed with one",
            "executor core (`local[1]`) and with two, each into its own snapshot of the table;",
            "the speed-up is its batch time on one core over two. Steady: the stream first",
            "applies 20 ordinary 1,000-row UPDATEs, as a stream that has run for a while",
            "meets a big transaction (median of three pairs; the times are the medians);",
            "first batch: the big transaction is the first batch of a job just started.",
            "",
            *cores_lines(raw.get("stream_cores") or {}),
            "",
        ]
    if raw.get("stream_memory"):
        parts += [
            "## Stream memory during one big transaction",
            "",
            "Peak PSS of the stream job's process tree (`bench/stream.py --big-transaction`):",
            "one UPDATE of every row of a table, applied as a backlog; one transaction is one",
            "batch, cut into slices at row events. `block_rows` bounds an executor's blocks,",
            "`max_merge_rows` the rows of one merge part.",
            "",
            *memory_lines(raw["stream_memory"]),
            "",
        ]
    if raw.get("object_store"):
        parts += [
            "## The lake on an object store",
            "",
            "The same jobs with the lake on an S3 server (SeaweedFS on loopback, started for",
            "the section: `bench/object_store.py`) against the lake on local disk, local and",
            "S3 runs alternating, the faster of two each. On S3 the chunk job's staged",
            "partitions (zstd-compressed Arrow IPC) and data files, and the stream's staged",
            "blocks, go through the store, which runs on the same two cores: that is the",
            "chunk job's overhead; the stream's time is decoding and merging either way.",
            "",
            *object_store_lines(raw["object_store"]),
            "",
        ]
    if raw.get("many_tables"):
        parts += [
            "## Many tables",
            "",
            "The shipped DAG through the real deployment (`bench/many_tables.py`), twice in a",
            "row: one table of 600,000 rows, then 300 tables of 2,000 rows (`many.*`), each",
            "from the DAG run's start to its stream's first committed batch; then a",
            "continuous stream of the 300 tables while a writer commits 2,000 changes/s",
            "spread over all of them (40 tables a transaction), and right after it the",
            "yardstick: a stream of its own of the one table, the same 2,000 changes/s into",
            "it; each writer starts once its stream has read the binlog since its start.",
            "",
            *many_tables_lines(raw["many_tables"]),
            "",
        ]
    if raw.get("many_tables_profile"):
        parts += [
            "## Many tables: one batch in process",
            "",
            "`bench/many_tables_profile.py`: the same one-row changes (half inserts, half",
            "updates, 40 a transaction) over 300 small tables and over one table, each range",
            "planned by the driver, read as one slice (`stream.slice_reader.read_slice`) and",
            "applied by the batch function (merges as 2 executor tasks, run in process);",
            "the phases and a cProfile of each are in `bench/out/many_tables_profile.json`.",
            "",
            *many_tables_profile_lines(raw["many_tables_profile"]),
            "",
        ]
    if raw.get("add_column"):
        parts += [
            "## A change of columns in place",
            "",
            "`bench/add_column.py`: `ALTER TABLE t ADD COLUMN c INT NOT NULL DEFAULT 7` on a",
            "table of 1,000,000 rows (MariaDB adds it without a row event), carried over by",
            "the stream's batch (every data file rewritten with `c = 7` in the live rows older",
            "than the ALTER, one commit), against a full re-snapshot of the table as a backfill",
            "with replace runs it (the Delta table created again, the chunk job through",
            "spark-submit, a JVM start included). Twice each, alternating; the faster of each",
            "compared.",
            "",
            *add_column_lines(raw["add_column"]),
            "",
        ]
    if raw.get("online_schema_change"):
        parts += [
            "## An online schema change in place",
            "",
            "`bench/online_schema_change.py`: Debian's pt-online-schema-change adds",
            "`color VARCHAR(10) NOT NULL DEFAULT 'red'` to the same 1,000,000-row table while",
            "the stream follows it; the batch with the swap carries the shadow's change over in",
            "place (every data file rewritten with `color = 'red'`), against a full",
            "re-snapshot of the table into a new generation (the chunk job through",
            "spark-submit), during which a reader polls the live table: the fewest rows it saw",
            "against the table's rows (1.0: never fewer than before).",
            "",
            *online_schema_change_lines(raw["online_schema_change"]),
            "",
        ]
    if raw.get("verify"):
        parts += [
            "## Verify",
            "",
            "`bench/verify.py`: `bench.t` snapshotted into a lake, then verified",
            "(`verify.check`: two read views sum the table's ranges by fingerprint in the",
            "server while DuckDB sums the Delta table, compared at one binlog position) against",
            "one `mariadb --quick` read of it. Twice each, alternating; the faster of each",
            "compared. Then once with a bound of half the rows a second the unbounded verify",
            "read, and the rate observed.",
            "",
            *verify_lines(raw["verify"]),
            "",
        ]
    if raw.get("keyless_snapshot"):
        parts += [
            "## A table without a key",
            "",
            "`bench/keyless_snapshot.py`: the same rows (`id BIGINT, c INT NOT NULL,",
            "v VARCHAR(40), d DECIMAL(12,2), t DATETIME(6)`, `KEY(c)`) with `id` the primary",
            "key and without any key (chunked by `c`, 5% exact duplicate rows), each planned",
            "and its chunks run in-process (`snapshot.unit.run_chunk`, partitions over 2",
            "worker processes), alternating, twice each; the faster of each compared, and",
            "every run's lake checked against the source (rows, `SUM(id)`, distinct images).",
            "Then the keyless read's parts on one core, the whole table in one view.",
            "",
            *keyless_snapshot_lines(raw["keyless_snapshot"]),
            "",
        ]
    if raw.get("keyless_stream"):
        parts += [
            "## A table without a key: the stream",
            "",
            "`bench/keyless_stream.py`: the tables of `bench/keyless_snapshot.py`, each in its",
            "own phase: snapshotted, then the same statements of one row each (inserts,",
            "`DELETE ... WHERE c = ? LIMIT 1`, `UPDATE ... WHERE c = ? LIMIT 1`, one seed, in",
            "transactions of 1 to 4), then streamed by the stream job's reader and batch",
            "function in-process without Spark until caught up, and the lake checked against",
            "the source (rows, `SUM(id)`, distinct rows). One run each. The slices turn the",
            "keyless table's changes into halves where they decode them",
            "(`stream.slice_halves`); the driver folds them into counts",
            "(`stream.apply_counts`); the parts of both are timed.",
            "",
            *keyless_stream_lines(raw["keyless_stream"]),
            "",
        ]
    if raw.get("masks_stream"):
        parts += [
            "## Columns left out and masked, change metadata: the stream",
            "",
            "`bench/masks_stream.py`: two tables of the same rows, one with `ssn` left out,",
            "`email` hashed and `notes` truncated (`columns`, `masks`) and `_cdc_op` and",
            "`_cdc_commit_ts` (`change_metadata`), each snapshotted, the",
            "same one-row statements on both (inserts, updates of every column), then each",
            "streamed in-process until caught up, twice in alternating order (the faster of",
            "each counts), every lake checked against the source with the rules applied by",
            "Python's `hmac`.",
            "",
            *masks_stream_lines(raw["masks_stream"]),
            "",
        ]
    if raw.get("hashed_keys"):
        parts += [
            "## A key hashed in the lake: snapshot and stream",
            "",
            "`bench/hashed_keys.py`: two tables of the same rows keyed by an email (binary",
            "collation), one with the key hashed (`masks`), each snapshotted in chunks run",
            "one after another (the hashed table's are all merges, without pruning: a",
            "hashed key says nothing of its range), the same one-row statements on both",
            "(updates, inserts, deletes), each streamed in-process until caught up, twice",
            "in alternating order (the faster counts), every lake checked against the",
            "source with Python's `hmac`. Informational: no target.",
            "",
            *hashed_keys_lines(raw["hashed_keys"]),
            "",
        ]
    if raw.get("routed_snapshot"):
        parts += [
            "## Routes: sharded tables into one Delta table, the first snapshot",
            "",
            "`bench/routed_snapshot.py`: sixteen shards with the same keys, each planned as",
            "one chunk and run in-process, into one Delta table by `routes` and into a table",
            "each, twice in alternating order (the faster of each counts); the routed table",
            "checked against the source.",
            "",
            *routed_snapshot_lines(raw["routed_snapshot"]),
            "",
        ]
    extra = {k: raw[k] for k in ("stream_latency", "stream_big_transaction") if raw.get(k)}
    if extra:
        parts += ["## Separate runs", ""]
        for name, figures in extra.items():
            note = figures.get("note", "")
            shown = ", ".join(f"{k} {v}" for k, v in figures.items() if k != "note")
            parts += [f"- `{name}`: {note}. {shown}", ""]
    parts += [
        "## Machine",
        "",
        *machine_lines(results),
        "",
        "## How to reproduce",
        "",
        REPRODUCE,
        "",
        "## Wall time per stage",
        "",
        *stage_lines(results),
        "",
    ]
    return "\n".join(parts)


# -- the plot ---------------------------------------------------------------------------------

Series = tuple[str, list[int], list[float]]


def _series(
    section: dict[str, Any] | None, label: str, pick: Callable[[dict[str, Any]], Any]
) -> Series | None:
    """(label, sizes, values) for the sizes where ``pick`` gives a value."""
    xs, ys = [], []
    for size in _sizes(section):
        value = pick((section or {})[str(size)])
        if value is not None:
            xs.append(size)
            ys.append(float(value))
    return (label, xs, ys) if xs else None


def plot_series(results: dict[str, Any]) -> dict[str, list[Series]]:
    """The curves of each panel."""
    raw = results.get("raw") or {}
    snap, e2e, stream = raw.get("snapshot"), raw.get("end_to_end"), raw.get("stream")
    plan = (raw.get("plan") or {}).get("sizes")
    panels: dict[str, list[Series | None]] = {
        "snapshot": [
            _series(
                snap, "mariadb CLI, 1 connection", lambda f: (f.get("cli") or {}).get("rows_per_s")
            ),
            _series(
                snap,
                "Spark JDBC → Parquet (action)",
                lambda f: (f.get("spark_jdbc") or {}).get("rows_per_s"),
            ),
            _series(
                snap,
                "Spark JDBC → noop (action)",
                lambda f: (f.get("spark_jdbc") or {}).get("noop_rows_per_s"),
            ),
            _series(
                snap,
                "product: chunk job (steady state)",
                lambda f: _get(f.get("product"), "chunk_job_rows_per_s"),
            ),
            _series(
                snap,
                "product: chunk job (fresh JVM)",
                lambda f: _get(f.get("product"), "cold_chunk_job_rows_per_s"),
            ),
            _series(e2e, "product: end to end (Airflow)", lambda f: f.get("end_to_end_rows_per_s")),
        ],
        "stream": [
            _series(
                stream,
                "single decoder (mysql-replication)",
                lambda f: _get(f, "single_decoder_changes_per_s", "raw_decode_changes_per_s"),
            ),
            _series(stream, "product: stream", lambda f: f.get("stream_changes_per_s")),
        ],
        "plan": [
            _series(plan, "product: planner", lambda f: f.get("plan_ms_per_chunk")),
        ],
    }
    return {name: [s for s in series if s] for name, series in panels.items()}


def _plural(count: Any, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _label_chunks(ax: Any, results: dict[str, Any]) -> None:
    """Write each planning point's chunk count and split method beside it."""
    section = ((results.get("raw") or {}).get("plan") or {}).get("sizes") or {}
    for size in _sizes(section):
        figures = section[str(size)]
        if figures.get("plan_ms_per_chunk") is not None:
            ax.annotate(
                f"{_plural(figures.get('chunks'), 'chunk')} ({figures.get('method')})",
                (size, figures["plan_ms_per_chunk"]),
                textcoords="offset points",
                xytext=(4, 6),
                fontsize=8,
            )


def draw_png(results: dict[str, Any], path: Path) -> None:
    """Three panels: snapshot rows/s, stream changes/s, planning ms per chunk, against size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter

    panels = plot_series(results)
    titles = {
        "snapshot": ("Snapshot of one table", "rows", "rows/s"),
        "stream": ("Stream (binlog → Delta)", "changes in the backlog", "changes/s"),
        "plan": ("Planning (uneven split, string key)", "rows", "ms per chunk"),
    }
    fig, axes = plt.subplots(1, 3, figsize=(17, 5.2))
    for ax, (name, (title, xlabel, ylabel)) in zip(axes, titles.items(), strict=True):
        ax.set_title(title)
        if not panels[name]:
            ax.text(0.5, 0.5, "not measured", ha="center", va="center", transform=ax.transAxes)
            ax.set_xticks([])
            ax.set_yticks([])
            continue
        sizes = sorted({x for _, xs, _ in panels[name] for x in xs})
        for label, xs, ys in panels[name]:
            style = "--" if "noop" in label else "-"
            marker = "o" if label.startswith("product") else "s"
            ax.plot(xs, ys, style, marker=marker, label=label)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_xscale("log")
        ax.set_xticks(sizes, [EngFormatter()(x) for x in sizes])
        ax.minorticks_off()
        ax.set_xlim(sizes[0] / 1.4, sizes[-1] * 1.6)  # room for the labels
        ax.yaxis.set_major_formatter(EngFormatter())
        top = max(y for _, _, ys in panels[name] for y in ys)
        ax.set_ylim(0, top * 1.15 if top > 0 else 1)  # room for the labels
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    _label_chunks(axes[2], results)
    machine = results.get("machine") or {}
    fig.suptitle(
        f"airflow-cdc benchmarks: {machine.get('cpu_count', '?')} cores, "
        f"{machine.get('mariadb', 'MariaDB')}, {machine.get('date', '')}",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(results_path: Path, docs: Path) -> tuple[Path, Path]:
    """Write ``benchmarks.md`` and ``benchmarks.png`` under ``docs``; their paths."""
    results = json.loads(results_path.read_text())
    docs.mkdir(parents=True, exist_ok=True)
    png = docs / "benchmarks.png"
    md = docs / "benchmarks.md"
    draw_png(results, png)
    kept = hand_kept(md.read_text()) if md.exists() else ""
    page = render_markdown(results, png.name)
    if kept:  # after the page's introduction, before the generated sections
        head, _, rest = page.partition("\n## Headline")
        page = f"{head}\n{kept}\n## Headline{rest}"
    md.write_text(page)
    return md, png


#: Marks of the page's hand-written section, which a redraw carries over as it is.
HAND_KEPT = ("<!-- hand-kept: start -->", "<!-- hand-kept: end -->")


def hand_kept(page: str) -> str:
    """The hand-written section of a page (its marks included), or ``""``."""
    start, end = page.find(HAND_KEPT[0]), page.find(HAND_KEPT[1])
    if start < 0 or end < start:
        return ""
    return page[start : end + len(HAND_KEPT[1])] + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--results", type=Path, default=BENCH / "results.json")
    parser.add_argument("--docs", type=Path, default=REPO / "docs")
    args = parser.parse_args()
    for path in write_report(args.results, args.docs):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
