"""The provider's Airflow plugin: the CDC page (``cdc_page``)."""
