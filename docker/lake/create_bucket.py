"""Create the lake's bucket (``LAKE_BUCKET``) on the S3 server, once; run by ``lake-init``
with the Airflow image (pyarrow). The keys come from the environment, not argv."""

from __future__ import annotations

import os
import time

import pyarrow.fs as pafs


def main() -> None:
    store = pafs.S3FileSystem(
        access_key=os.environ["LAKE_ACCESS_KEY"],
        secret_key=os.environ["LAKE_SECRET_KEY"],
        endpoint_override=os.environ.get("LAKE_ENDPOINT", "lake:8333"),
        scheme="http",
        region="us-east-1",
        allow_bucket_creation=True,
    )
    bucket = os.environ.get("LAKE_BUCKET", "lake")
    for attempt in range(60):
        try:
            store.create_dir(bucket)
            print(f"bucket {bucket!r} is there")
            return
        except OSError as exc:  # the gateway is still starting
            if attempt == 59:
                raise
            print(f"waiting for the S3 gateway: {exc}")
            time.sleep(2)


if __name__ == "__main__":
    main()
