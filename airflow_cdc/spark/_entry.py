"""The command line every Spark entry point shares: ``--job-file PATH`` and log set-up."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

__all__ = ["job_file_argument"]


def job_file_argument(argv: Sequence[str] | None, *, prog: str, description: str | None) -> str:
    """Parse ``--job-file PATH`` and send log lines to stdout (spark-submit's log, which the
    Airflow task shows)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(
        "--job-file", required=True, help="JSON job spec written by the Airflow task"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stdout,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return str(args.job_file)
