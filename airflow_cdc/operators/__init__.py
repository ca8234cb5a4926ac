"""Airflow operators of airflow-cdc (import the submodules; they import Airflow)."""

__all__: list[str] = []
