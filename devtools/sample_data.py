"""Sample tables for the demo and the tests: an integer key and a composite string key."""

from __future__ import annotations

from devtools.local_mariadb import LocalMariaDB

__all__ = ["create_sample_schema"]


def create_sample_schema(
    server: LocalMariaDB, database: str, *, orders: int, customers: int
) -> None:
    """``<db>.orders`` (BIGINT key, ``orders`` rows) and ``<db>.customers`` (key
    ``(country, email)`` in utf8mb4_general_ci, ``customers`` rows), filled server-side."""
    db = f"`{database}`"
    server.execute(
        f"DROP DATABASE IF EXISTS {db}",
        f"CREATE DATABASE {db} CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
        f"""CREATE TABLE {db}.orders (
            id BIGINT NOT NULL PRIMARY KEY,
            customer_email VARCHAR(64) NOT NULL,
            status ENUM('new','paid','shipped','cancelled') NOT NULL,
            quantity INT NOT NULL,
            amount DECIMAL(12,2) NOT NULL,
            note VARCHAR(200) NULL,
            created_at DATETIME(6) NOT NULL,
            updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
        )""",
        f"""CREATE TABLE {db}.customers (
            country CHAR(2) NOT NULL,
            email VARCHAR(64) NOT NULL,
            name VARCHAR(100) NOT NULL,
            vip TINYINT(1) NOT NULL DEFAULT 0,
            signed_up DATE NOT NULL,
            PRIMARY KEY (country, email)
        )""",
        f"""INSERT INTO {db}.orders
            SELECT seq, CONCAT('user', seq % 5000, '@example.com'),
                   ELT(1 + seq % 4, 'new', 'paid', 'shipped', 'cancelled'),
                   1 + seq % 7, ROUND(seq * 0.37 % 1000, 2),
                   IF(seq % 10 = 0, CONCAT('note ', seq, ' – ünïcödé ✓'), NULL),
                   '2024-01-01 00:00:00' + INTERVAL seq SECOND,
                   '2024-06-01 00:00:00' + INTERVAL seq SECOND
            FROM {db}.seq_1_to_{orders}""",
        f"""INSERT INTO {db}.customers
            SELECT ELT(1 + seq % 6, 'DE', 'FR', 'US', 'jp', 'Br', 'IN'),
                   CONCAT(IF(seq % 3 = 0, 'User', 'user'), seq, '@Example.com'),
                   CONCAT('Customer ', seq), seq % 2, '2020-01-01' + INTERVAL seq % 1500 DAY
            FROM {db}.seq_1_to_{customers}""",
    )
