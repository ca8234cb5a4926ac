#!/bin/bash
# PostgreSQL first start (empty data volume), run by the image's entrypoint: besides
# Airflow's own database (POSTGRES_DB), the CDC metadata database and its owner, from the
# variables CDC_METADATA_DB / CDC_METADATA_USER / CDC_METADATA_PASSWORD (docker-compose.yaml).
set -euo pipefail

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    -v cdc_db="$CDC_METADATA_DB" \
    -v cdc_user="$CDC_METADATA_USER" \
    -v cdc_password="$CDC_METADATA_PASSWORD" <<'SQL'
CREATE ROLE :"cdc_user" LOGIN PASSWORD :'cdc_password';
CREATE DATABASE :"cdc_db" OWNER :"cdc_user";
SQL
