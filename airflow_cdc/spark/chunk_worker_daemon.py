"""Spark's Python worker daemon for chunk jobs: :mod:`.worker_daemon` with the chunk's
imports only (``CHUNK_PRELOAD``)."""

from __future__ import annotations

from airflow_cdc.spark.worker_daemon import CHUNK_PRELOAD, serve

__all__: list[str] = []

if __name__ == "__main__":
    serve(CHUNK_PRELOAD)
