"""The ``[cdc]`` section read through Airflow's configuration (the Task SDK's ``conf``,
which DAG files and task code read in Airflow 3), with the deprecated ``CDC_<KEY>``
environment variables as its aliases for one release.

A key counts as set when Airflow's configuration sets it: its ``AIRFLOW__CDC__<KEY>``
environment variable or ``[cdc] <key>`` in ``airflow.cfg``; its default (declared by the
provider, :mod:`airflow_cdc.settings`) does not count. A key that is not set takes its
``CDC_<KEY>`` variable, when set, with a warning naming the key to set instead; a
``CDC_<KEY>`` beside a set key is ignored, with a warning too
(:func:`airflow_cdc.settings.given_settings`).
"""

from __future__ import annotations

import configparser
import logging
import os
import warnings

from airflow.sdk import conf

from airflow_cdc.settings import SECTION, SETTINGS, Given, given_settings

__all__ = ["cdc_settings"]

log = logging.getLogger(__name__)


def cdc_settings() -> Given:
    """The ``[cdc]`` values that are set, each with where it was set; a warning
    (``DeprecationWarning`` and a log line) for each deprecated variable met."""
    set_in_airflow: dict[str, tuple[str, str]] = {}
    for s in SETTINGS:
        if s.env_var in os.environ:
            set_in_airflow[s.key] = (conf.get(SECTION, s.key), s.env_var)
        # The file's own options (ConfigParser's view): Airflow's ``has_option`` also
        # counts the provider's default.
        elif configparser.ConfigParser.has_option(conf, SECTION, s.key):
            set_in_airflow[s.key] = (conf.get(SECTION, s.key), f"{s.label} of airflow.cfg")
    given, deprecated = given_settings(set_in_airflow, os.environ)
    for found in deprecated:
        # Attributed to this module, which Airflow's warning filters show (``airflow*``).
        warnings.warn(found.message(), DeprecationWarning, stacklevel=1)
        log.warning("%s", found.message())
    return given
