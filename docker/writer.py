"""Demo writer: random inserts, updates and deletes on demo.orders and demo.customers.

Runs in the ``writer`` service of docker-compose.yaml so the stream has changes to carry.
Configured by environment variables:

    WRITER_HOST, WRITER_PORT      the MySQL server (mysql, 3306)
    WRITER_USER, WRITER_PASSWORD  an account that may write the demo database
    WRITER_DATABASE               the sample schema (demo)
    WRITER_RATE                   transactions per second (5)
    WRITER_ROWS_PER_TX            statements per transaction (1..this, 3)
    WRITER_SEED                   random seed (empty: random)
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from typing import Any

import pymysql

STATUSES = ("new", "paid", "shipped", "cancelled")
COUNTRIES = ("DE", "FR", "US", "jp", "Br", "IN")
_running = True


def _stop(_signum: int, _frame: Any) -> None:
    global _running
    _running = False


def env(name: str, default: str) -> str:
    return os.environ.get(name, "") or default


def connect() -> pymysql.connections.Connection[Any]:
    deadline = time.monotonic() + 300
    while True:
        try:
            return pymysql.connect(
                host=env("WRITER_HOST", "mysql"),
                port=int(env("WRITER_PORT", "3306")),
                user=env("WRITER_USER", "root"),
                password=os.environ.get("WRITER_PASSWORD", ""),
                database=env("WRITER_DATABASE", "demo"),
                charset="utf8mb4",
                autocommit=False,
            )
        except pymysql.err.OperationalError as error:
            if time.monotonic() > deadline:
                raise
            print(f"writer: waiting for MySQL ({error.args[0]})", flush=True)
            time.sleep(2)


def one_change(cur: Any, rng: random.Random, max_id: int) -> tuple[str, int]:
    """One random statement; returns (kind, new max order id)."""
    roll = rng.random()
    if roll < 0.4:
        max_id += 1
        cur.execute(
            "INSERT INTO orders (id, customer_email, status, quantity, amount, note, created_at)"
            " VALUES (%s, %s, 'new', %s, %s, %s, UTC_TIMESTAMP(6))",
            (
                max_id,
                f"user{rng.randrange(5000)}@example.com",
                rng.randint(1, 7),
                round(rng.uniform(1, 999), 2),
                rng.choice([None, "gift ✓", "ünïcödé"]),
            ),
        )
        return "insert", max_id
    if roll < 0.8:
        cur.execute(
            "UPDATE orders SET status = %s, amount = amount + %s,"
            " updated_at = CURRENT_TIMESTAMP(6) WHERE id = %s",
            (rng.choice(STATUSES), round(rng.uniform(-5, 5), 2), rng.randint(1, max_id)),
        )
        return "update", max_id
    if roll < 0.9:
        cur.execute("DELETE FROM orders WHERE id = %s", (rng.randint(1, max_id),))
        return "delete", max_id
    if roll < 0.95:
        n = rng.randrange(10**6)
        cur.execute(
            "INSERT INTO customers (country, email, name, vip, signed_up)"
            " VALUES (%s, %s, %s, %s, UTC_DATE())"
            " ON DUPLICATE KEY UPDATE name = VALUES(name)",
            (rng.choice(COUNTRIES), f"w{n}@example.com", f"Writer {n}", n % 2),
        )
        return "insert", max_id
    cur.execute(
        "UPDATE customers SET vip = 1 - vip WHERE country = %s ORDER BY email LIMIT 1",
        (rng.choice(COUNTRIES),),
    )
    return "update", max_id


def main() -> int:
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    seed = os.environ.get("WRITER_SEED", "")
    rng = random.Random(int(seed)) if seed else random.Random()
    rate = float(env("WRITER_RATE", "5"))
    per_tx = int(env("WRITER_ROWS_PER_TX", "3"))
    conn = connect()
    with conn.cursor() as cur:
        cur.execute("SELECT COALESCE(MAX(id), 0) FROM orders")
        (max_id,) = cur.fetchone()
    counts = {"insert": 0, "update": 0, "delete": 0}
    last_report = time.monotonic()
    while _running:
        started = time.monotonic()
        try:
            with conn.cursor() as cur:
                for _ in range(rng.randint(1, per_tx)):
                    kind, max_id = one_change(cur, rng, int(max_id))
                    counts[kind] += 1
            conn.commit()
        except pymysql.err.OperationalError as error:
            print(f"writer: {error}; reconnecting", flush=True)
            conn = connect()
        if time.monotonic() - last_report > 30:
            print(f"writer: {counts}", flush=True)
            last_report = time.monotonic()
        time.sleep(max(0.0, 1 / rate - (time.monotonic() - started)))
    conn.close()
    print(f"writer: stopped after {counts}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
