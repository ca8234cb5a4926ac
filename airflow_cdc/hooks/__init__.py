"""Airflow hooks: turn Airflow connections into airflow-cdc configuration objects.

Connections are the only place secrets come from; the hooks hand them on inside
``SourceConfig`` / the metadata URL (both hidden from ``repr``) and never log them.
"""

from airflow_cdc.hooks.metadata import CdcMetadataHook
from airflow_cdc.hooks.source import CdcSourceHook

__all__ = ["CdcMetadataHook", "CdcSourceHook"]
