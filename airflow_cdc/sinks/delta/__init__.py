"""The embedded default sink: Delta Lake tables written with delta-rs.

The facade is :class:`DeltaSink` (the :class:`~airflow_cdc.sinks.contract.base.Sink` Protocol and
what only Delta has: upkeep, files written by executors). The rest of the product imports
this package and nothing under it; the modules below are the write protocol's parts:

* the facade: ``sink`` (:class:`DeltaSink`, and its executor tasks' entry points), over
  ``tables`` (what it answers about its tables);
* where a table lives and what it is: ``layout`` (key, bucket width, schema), ``buckets``,
  ``places`` (live table or the generation being built), ``open_tables``, ``planned``
  (the table a source table asks for), ``route_tables`` (a routed table's columns);
* writing: ``changes`` (a batch prepared), ``merge`` (delta-rs MERGE), ``rewrite`` (small
  batches by file rewrite), ``split`` (one big batch over the executors), ``files`` and
  ``ranges`` (files written elsewhere, committed as a new key range), ``commits``
  (application transactions, commit properties), ``retry``, ``outcome`` and
  ``commit_log`` (whether a commit that raised landed);
* a batch over the executors: ``batch_merge`` (a share of the tables a task),
  ``split_merge`` (the job, split tasks for a big table), ``core_pinning`` (a task on one
  core);
* changing a table: ``evolve`` (columns), ``truncate`` and ``row_filters``, ``copy``
  (renames), ``generations`` (replacement without a hole);
* upkeep: ``upkeep``, ``older``, ``purge``, ``stagger``;
* reading: ``reads``, ``writer_versions`` (the writers' application versions).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_cdc import lazy_exports

if TYPE_CHECKING:
    from airflow_cdc.sinks.delta.sink import DeltaSink
    from airflow_cdc.sinks.delta.upkeep import UpkeepResult, UpkeepSettings

#: Loaded on first use: a worker unpickling a light part (``files``) needs no delta-rs.
_HOMES = {"DeltaSink": "sink", "UpkeepResult": "upkeep", "UpkeepSettings": "upkeep"}
__getattr__ = lazy_exports(__name__, _HOMES)

__all__ = ["DeltaSink", "UpkeepResult", "UpkeepSettings"]
