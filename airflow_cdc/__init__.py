"""airflow-cdc: lock-free incremental-snapshot CDC from MySQL/MariaDB to Delta Lake on Airflow + Spark."""

__version__ = "0.1.0"
