"""Alembic migrations of the metadata DB (run by :mod:`airflow_cdc.metadata.migrate`)."""
