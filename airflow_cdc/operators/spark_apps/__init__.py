"""Entry scripts handed to ``spark-submit`` (files, not imported by the package).

They live inside the installed package so a DAG author who pip-installs airflow-cdc gets
a path that exists (see ``airflow_cdc.operators.snapshot.SNAPSHOT_CHUNK_APPLICATION``).
This folder holds nothing else on purpose: Python puts a script's folder first on
``sys.path``, and any sibling module would shadow a top-level module of the same name.
"""
