"""The mask connection (``cdc_mask``): its password is the key of ``hash`` masks.

Read only when a ``hash`` mask is set; the key reaches a Spark job only inside the 0600
job file, never in argv, XCom or a log line.
"""

from __future__ import annotations

from typing import ClassVar

from airflow.sdk.exceptions import AirflowNotFoundException

from airflow_cdc.connection_ids import MASK_CONN_ID
from airflow_cdc.errors import ConfigurationError
from airflow_cdc.hooks._base import CdcHook

__all__ = ["CdcMaskHook"]


class CdcMaskHook(CdcHook):
    """Reads the mask key from the connection's password."""

    default_conn_name: ClassVar[str] = MASK_CONN_ID
    conn_type: ClassVar[str] = "generic"
    hook_name: ClassVar[str] = "CDC mask key"

    def get_conn(self) -> str:
        return self.mask_key()

    def mask_key(self) -> str:
        """The connection's password; :class:`ConfigurationError` naming the fix when the
        connection or its password is missing."""
        fix = (
            f"create it with a long random password, e.g. airflow connections add "
            f"{self.conn_id} --conn-type generic --conn-password '<random text>'"
        )
        try:
            conn = self.get_connection(self.conn_id)
        except AirflowNotFoundException:
            raise ConfigurationError(
                f"a 'hash' mask needs the key in connection {self.conn_id!r}, which does "
                f"not exist: {fix}"
            ) from None
        if not conn.password:
            raise ConfigurationError(
                f"connection {self.conn_id!r} has no password, the key of 'hash' masks: {fix}"
            )
        return str(conn.password)
