"""Yardstick: Spark's own JDBC source reading a table into Parquet.

What a Spark user would write without this project: ``spark.read.jdbc`` with Debian's
MariaDB Connector/J, 4 partitions on the integer key, written to Parquet, run through the
real ``spark-submit --master local[2]`` (the product's chunk jobs run the same way). The
application (``spark_jdbc_app.py``) times only its actions, after a warm-up on the first
keys; the whole ``spark-submit`` wall time is reported beside them. The password reaches Spark through an environment variable,
never the command line.

    .venv/bin/python bench/spark_jdbc.py --rows 200000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from airflow_cdc.spark.environment import spark_environment, spark_submit_binary
from devtools.local_mariadb import LocalMariaDB

JDBC_JAR = Path("/usr/share/java/mariadb-java-client.jar")
APP = Path(__file__).resolve().parent / "spark_jdbc_app.py"
PASSWORD_VARIABLE = "BENCH_JDBC_PASSWORD"
MARKER = "BENCH_JSON "


def spark_jdbc_to_parquet(
    server: LocalMariaDB,
    table: str,
    rows: int,
    workdir: Path,
    *,
    key: str = "id",
    partitions: int = 4,
    noop: bool = True,
    warmup_rows: int = 50_000,
) -> dict[str, Any]:
    """Read ``table`` (``db.name``, integer ``key`` from 1 to ``rows``) with Spark JDBC into
    Parquet under ``workdir``; return rows/s of the timed action and the timings.

    Keys: ``rows_per_s`` and ``action_seconds`` (read + Parquet write), ``submit_seconds``
    (the whole spark-submit, JVM start included), ``rows_written``, and with ``noop`` also
    ``noop_rows_per_s``/``noop_seconds`` (the same read into Spark's ``noop`` sink), and
    ``warmup_seconds``: the same job on the first ``warmup_rows`` keys, run first and not
    counted (the yardstick at its steady rate; 0 to time a cold first action).
    """
    if not JDBC_JAR.exists():
        raise RuntimeError(f"{JDBC_JAR} is missing: install libmariadb-java (make setup)")
    database, name = table.split(".", 1)
    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / f"spark-jdbc-{name}-{rows}.parquet"
    log_path = workdir / f"spark-jdbc-{name}-{rows}.log"
    command = [
        spark_submit_binary(),
        "--master",
        "local[2]",
        "--conf",
        "spark.ui.enabled=false",
        "--jars",
        str(JDBC_JAR),
        str(APP),
        "--url",
        f"jdbc:mysql://127.0.0.1:{server.port}/{database}",
        "--user",
        "cdc",
        "--table",
        name,
        "--column",
        key,
        "--lower",
        "1",
        "--upper",
        str(rows + 1),
        "--partitions",
        str(partitions),
        "--out",
        str(out),
        "--warmup-rows",
        str(warmup_rows),
        *(["--noop"] if noop else []),
    ]
    env = dict(os.environ, **spark_environment(), **{PASSWORD_VARIABLE: server.cdc_password})
    started = time.perf_counter()
    with open(log_path, "wb") as log:
        done = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=log, check=False)
    submit_seconds = time.perf_counter() - started
    stdout = done.stdout.decode(errors="replace")
    lines = [line for line in stdout.splitlines() if line.startswith(MARKER)]
    if done.returncode != 0 or not lines:
        tail = log_path.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"spark-submit failed ({done.returncode}); log {log_path}:\n{tail}")
    timings = json.loads(lines[-1][len(MARKER) :])
    if timings["rows_written"] != rows:
        raise RuntimeError(f"Spark JDBC wrote {timings['rows_written']} rows, expected {rows}")
    result = {
        "rows": rows,
        "rows_per_s": round(rows / timings["action_seconds"]),
        "action_seconds": round(timings["action_seconds"], 3),
        "submit_seconds": round(submit_seconds, 3),
        "rows_written": timings["rows_written"],
        "partitions": partitions,
    }
    if "warmup_seconds" in timings:
        result["warmup_rows"] = min(warmup_rows, rows)
        result["warmup_seconds"] = round(timings["warmup_seconds"], 3)
    if "noop_seconds" in timings:
        result["noop_rows_per_s"] = round(rows / timings["noop_seconds"])
        result["noop_seconds"] = round(timings["noop_seconds"], 3)
    return result


def main() -> None:
    """Start a private MariaDB, create the bench table, run the yardstick, print JSON."""
    from bench_table import bench_server, create_bench_table

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=200_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cdc-bench-jdbc-") as tmp:
        workdir = Path(tmp)
        with bench_server(workdir / "db") as server:
            create_bench_table(server, args.rows)
            print(
                json.dumps(spark_jdbc_to_parquet(server, "bench.t", args.rows, workdir), indent=2)
            )


if __name__ == "__main__":
    main()
