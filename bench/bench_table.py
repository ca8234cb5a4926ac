"""The benchmark table: the yardsticks' row shape (~132 B: bigint key, int, varchar(16),
decimal(12,2), varchar(200) of ~60 chars, datetime(6), timestamp(6))."""

from __future__ import annotations

from airflow_cdc.devtools.local_mariadb import LocalMariaDB


def create_bench_table(server: LocalMariaDB, rows: int) -> None:
    server.execute(
        "DROP DATABASE IF EXISTS bench",
        "CREATE DATABASE bench",
        """CREATE TABLE bench.t (id BIGINT PRIMARY KEY, n INT NOT NULL, code VARCHAR(16) NOT NULL,
           amount DECIMAL(12,2) NOT NULL, note VARCHAR(200) NOT NULL, created DATETIME(6) NOT NULL,
           updated TIMESTAMP(6) NOT NULL)""",
        f"""INSERT INTO bench.t SELECT seq, seq % 1000, CONCAT('code', seq % 9999), seq % 100000 / 100,
            RPAD(CONCAT('note ', seq), 60, 'x'), '2024-01-01' + INTERVAL seq SECOND,
            '2024-06-01' + INTERVAL seq SECOND FROM bench.seq_1_to_{rows}""",
    )
