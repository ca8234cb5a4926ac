"""What every airflow-cdc hook is: a hook on one Airflow connection, named by ``conn_id``."""

from __future__ import annotations

from typing import ClassVar

from airflow.sdk import BaseHook

__all__ = ["CdcHook"]


class CdcHook(BaseHook):
    """A hook on the Airflow connection ``conn_id``, by default the hook's
    ``default_conn_name``."""

    conn_name_attr: ClassVar[str] = "conn_id"
    default_conn_name: ClassVar[str]

    def __init__(self, conn_id: str | None = None) -> None:
        super().__init__()
        self.conn_id = self.default_conn_name if conn_id is None else conn_id
