"""Airflow hooks: turn Airflow connections into airflow-cdc configuration objects.

Connections are the only place secrets come from; the hooks hand them on inside
``SourceConfig``, the metadata URL and the lake's storage options (all hidden from
``repr``) and never log them.
"""

from airflow_cdc.hooks.lake import CdcLakeHook
from airflow_cdc.hooks.metadata import CdcMetadataHook
from airflow_cdc.hooks.source import CdcSourceHook

__all__ = ["CdcLakeHook", "CdcMetadataHook", "CdcSourceHook"]
