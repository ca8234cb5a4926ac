"""The lake's storage: where a table or file is (``storage``), the staging area of files
the executors hand over (``staging``), the lake's Airflow connection as storage options
(``connection``), and the check that the lake is reachable and writable (``write_check``).
"""
