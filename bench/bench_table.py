"""The benchmark table: the yardsticks' row shape (~132 B: bigint key, int, varchar(16),
decimal(12,2), varchar(200) of ~60 chars, datetime(6), timestamp(6))."""

from __future__ import annotations

from pathlib import Path

from devtools.local_mariadb import LocalMariaDB
from devtools.spark_scratch import use_private_spark_scratch

#: InnoDB's buffer pool of the benchmark's server: large enough for every table the run
#: creates (the 10M-row snapshot and planning tables are about 1.5 and 0.9 GB), as a
#: production server is sized for its working set. With the test servers' 512 MB, a table
#: larger than the pool is read from the OS's page cache page by page, and planning a 5M-row
#: string key took 84 ms per chunk instead of 20 (2026-11-22, same machine).
BUFFER_POOL = "4G"


def bench_server(base_dir: Path) -> LocalMariaDB:
    """The benchmark's MariaDB (not started): the tests' server with :data:`BUFFER_POOL`.
    The Spark jobs a benchmark starts afterwards keep their scratch folders in a private
    folder, removed when the benchmark ends (the latency runs kill their streams)."""
    use_private_spark_scratch()
    return LocalMariaDB(base_dir, extra_args=(f"--innodb-buffer-pool-size={BUFFER_POOL}",))


def _insert_rows(first: int, last: int) -> str:
    """INSERT of the rows with ids ``first .. last`` (from MariaDB's sequence engine)."""
    return f"""INSERT INTO bench.t SELECT seq, seq % 1000, CONCAT('code', seq % 9999), seq % 100000 / 100,
        RPAD(CONCAT('note ', seq), 60, 'x'), '2024-01-01' + INTERVAL seq SECOND,
        '2024-06-01' + INTERVAL seq SECOND FROM bench.seq_{first}_to_{last}"""


def create_bench_table(server: LocalMariaDB, rows: int) -> None:
    server.execute(
        "DROP DATABASE IF EXISTS bench",
        "CREATE DATABASE bench",
        """CREATE TABLE bench.t (id BIGINT PRIMARY KEY, n INT NOT NULL, code VARCHAR(16) NOT NULL,
           amount DECIMAL(12,2) NOT NULL, note VARCHAR(200) NOT NULL, created DATETIME(6) NOT NULL,
           updated TIMESTAMP(6) NOT NULL)""",
        _insert_rows(1, rows),
    )


def grow_bench_table(server: LocalMariaDB, rows_now: int, rows: int) -> None:
    """Add ids ``rows_now + 1 .. rows`` to a table made by :func:`create_bench_table` with
    ``rows_now`` rows and left unchanged since: the same rows as creating it with ``rows``."""
    if rows > rows_now:
        server.execute(_insert_rows(rows_now + 1, rows))
