"""Airflow hooks: turn Airflow connections into airflow-cdc configuration objects.

Connections are the only place secrets come from; the hooks hand them on inside
``SourceConfig``, the metadata URL, the lake's storage options and the mask key (all hidden from
``repr``) and never log them.
"""

from airflow_cdc.hooks.lake import CdcLakeHook
from airflow_cdc.hooks.mask import CdcMaskHook
from airflow_cdc.hooks.metadata import CdcMetadataHook
from airflow_cdc.hooks.source import CdcSourceHook

__all__ = ["CdcLakeHook", "CdcMaskHook", "CdcMetadataHook", "CdcSourceHook"]
