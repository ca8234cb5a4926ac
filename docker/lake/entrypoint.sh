#!/bin/sh
# The lake's S3 server (SeaweedFS): renders its identities file from the environment
# (readable by this container only; the keys never appear on a command line), then runs
# master, volume, filer and the S3 gateway in one process.
set -eu
umask 077
config=/tmp/s3-identities.json
cat >"$config" <<JSON
{"identities": [{"name": "cdc", "credentials": [{"accessKey": "${LAKE_ACCESS_KEY}", "secretKey": "${LAKE_SECRET_KEY}"}], "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}
JSON
exec weed server -dir=/data -ip=lake -ip.bind=0.0.0.0 -s3 -s3.port=8333 -s3.config="$config" \
    -master.volumeSizeLimitMB=1024
