"""Verify of a table with a ``hash`` mask against verify of the same table without masks,
in one run (the cost of keeping the mask key off the wire).

``bench.t`` (``bench_table.py``'s row shape) at ``--rows`` rows, snapshotted twice with the
chunk job's code in-process: into a plain lake, and into a lake with ``note`` (a
VARCHAR(200) of ~60 characters) hashed. Then, alternating, twice each: verify of each
lake (``verify.run.verify_tables`` with the default settings and the lake's rules: two
read views over the table's ranges, DuckDB summing the Delta table meanwhile), its wall
time from the plan of its ranges to the comparison; both verify clean.

``masked_verify_vs_plain`` = the faster masked verify / the faster plain one. The script
takes the product from the folder above it: run the same file from another checkout to
measure that checkout's product.

    .venv/bin/python bench/verify_masked.py --rows 1000000
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_table import bench_server, create_bench_table  # noqa: E402

from devtools.local_mariadb import LocalMariaDB  # noqa: E402

__all__ = ["measure_verify_masked"]

RUNS = 2
CHUNK_ROWS = 250_000
MASK_KEY = "bench-mask-key"


def _snapshot(server: LocalMariaDB, rules: Any, workdir: Path) -> tuple[str, Path]:
    """``bench.t`` planned and its chunks run in-process under ``rules``: meta URL, lake."""
    from airflow_cdc.snapshot.unit import run_chunk
    from tests.support.pipeline import job_spec, plan

    workdir.mkdir(parents=True, exist_ok=True)
    meta, lake = f"sqlite:///{workdir / 'meta.db'}", workdir / "lake"
    record = plan(server, ["bench.t"], CHUNK_ROWS, meta)
    specs = [
        dataclasses.replace(job_spec(server, c.chunk_id, meta, lake), lake_columns=rules)
        for c in record.chunks
    ]
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(run_chunk, specs))
    return meta, lake


def measure_verify_masked(server: LocalMariaDB, rows: int, workdir: Path) -> dict[str, Any]:
    """The figures above, for ``bench.t`` as it is (``rows`` rows)."""
    from airflow_cdc.config import LakeColumnsConfig, SinkConfig, VerifySettings
    from airflow_cdc.metadata import MetadataStore
    from airflow_cdc.model import TableId
    from airflow_cdc.source.catalog import load_table_schema
    from airflow_cdc.source.connection import connect
    from airflow_cdc.source.server import server_info
    from airflow_cdc.verify.run import verify_tables
    from tests.support.pipeline import source_config

    masked_rules = LakeColumnsConfig(masks={"bench.t.note": "hash"}, mask_key=MASK_KEY)
    lakes = {}
    for name, rules in (("plain", LakeColumnsConfig()), ("masked", masked_rules)):
        meta, lake = _snapshot(server, rules, workdir / name)
        lakes[name] = (meta, lake, rules)
    cfg = source_config(server)

    def verify(name: str) -> float:
        meta, lake, rules = lakes[name]
        with MetadataStore.connect(meta) as store:
            epoch = store.servers.current(cfg, may_switch=False)
        conn = connect(cfg)
        try:
            info, schema = server_info(conn, epoch), load_table_schema(conn, TableId("bench", "t"))
        finally:
            conn.close()
        (outcome,) = verify_tables(
            cfg, info, SinkConfig(str(lake)), [schema], VerifySettings(), lambda: None,
            repair=False, lake_columns=rules,
        )  # fmt: skip
        found = outcome.check
        if found is None or not found.clean or found.rows != rows:
            raise RuntimeError(f"bench.t ({name}) should verify clean with {rows} rows: {outcome}")
        return found.seconds

    seconds: dict[str, list[float]] = {"plain": [], "masked": []}
    for _ in range(RUNS):
        for name in seconds:
            seconds[name].append(verify(name))
    plain, masked = min(seconds["plain"]), min(seconds["masked"])
    return {
        "rows": rows,
        "plain_seconds": [round(s, 2) for s in seconds["plain"]],
        "masked_seconds": [round(s, 2) for s in seconds["masked"]],
        "plain_rows_per_s": round(rows / plain),
        "masked_rows_per_s": round(rows / masked),
        "masked_verify_vs_plain": round(masked / plain, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out")
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cdc-bench-verify-masked-") as tmp:
        server = bench_server(Path(tmp) / "db")
        server.start()
        try:
            create_bench_table(server, args.rows)
            result = measure_verify_masked(server, args.rows, Path(tmp))
        finally:
            server.stop()
    result["seconds"] = round(time.perf_counter() - started, 1)
    args.out.mkdir(exist_ok=True)
    (args.out / "verify_masked.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
