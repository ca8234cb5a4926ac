"""Airflow triggers of airflow-cdc, which deferred tasks hand their waits to (Airflow's
triggerer runs them; import the submodules, they import Airflow)."""

__all__: list[str] = []
