"""Airflow's metrics client (``Stats``): where airflow-cdc's figures go, so a deployment's
StatsD or OpenTelemetry set-up sees them beside Airflow's own (nothing is sent where
Airflow's metrics are off).

A figure is a gauge named ``airflow_cdc.<what>.<id>.<figure>`` (StatsD has no tags, so the
id is in the name) and tagged with the id, for back ends that take tags.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from airflow.sdk.observability.stats import Stats

__all__ = ["emit_gauges", "stat_name"]

_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_.-]")


def stat_name(*parts: str) -> str:
    """``airflow_cdc.<parts...>``, each part with the characters Airflow refuses in a stat
    name replaced by ``_``."""
    return ".".join(["airflow_cdc", *(_NOT_ALLOWED.sub("_", part) for part in parts)])


def emit_gauges(what: str, ident: str, gauges: Mapping[str, float], *, tag: str) -> None:
    """Each of ``gauges`` as ``airflow_cdc.<what>.<ident>.<name>``, tagged ``{tag: ident}``."""
    for name, value in gauges.items():
        Stats.gauge(stat_name(what, ident, name), value, tags={tag: ident})
