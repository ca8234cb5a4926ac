"""Named points in a chunk job and a stream batch where an observer may look in.

The jobs call ``probe.reach(point)`` at the boundaries of their phases (a chunk's low
watermark, read, write and commit; a batch's apply). By default nothing is there. A probe
is named by a :class:`ProbeConfig` in the job spec, ``module:callable`` called with one
string argument, and loaded in the Spark driver: the repository's tests use one that pauses
or fails a job at a point (``devtools.pause_points``) to land writes in the low-watermark
race or to kill a job mid-commit; an operator could use one to trace.

Points of a chunk, in order: ``chunk_start``, ``after_low_watermark``, ``after_read``,
``before_commit``, ``files_written``, ``after_commit``. Of a stream batch:
``stream_before_apply``, ``stream_after_apply``; within it, before each merge of a table
applied in binlog order or of a joining table's replay: ``stream_in_order_merge``,
``stream_replay_merge``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, cast

from airflow_cdc.errors import ConfigurationError

__all__ = ["NO_PROBE", "Probe", "ProbeConfig"]


class Probe(Protocol):
    def reach(self, point: str) -> None:
        """Called when the job reaches ``point``; may wait, or raise to fail the job there."""


class _NoProbe:
    def reach(self, point: str) -> None:
        return None


NO_PROBE: Probe = _NoProbe()


@dataclass(frozen=True)
class ProbeConfig:
    """``factory``: ``module:callable`` returning a :class:`Probe`, called with ``argument``;
    empty: no probe."""

    factory: str = ""
    argument: str = ""

    def __post_init__(self) -> None:
        if self.factory and ":" not in self.factory:
            raise ConfigurationError(
                f"probe factory {self.factory!r} must be written module:callable"
            )

    def load(self) -> Probe:
        if not self.factory:
            return NO_PROBE
        module_name, _, attribute = self.factory.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as exc:
            raise ConfigurationError(
                f"probe factory {self.factory} cannot be loaded ({exc}): unset CDC_PROBE, or "
                "make its module importable by the Spark driver"
            ) from exc
        return cast(Callable[[str], Probe], factory)(self.argument)
