"""Named points in a chunk job and a stream batch where an observer may look in.

The jobs call ``probe.reach(point)`` at the boundaries of their phases (a chunk's low
watermark, read, write and commit; a batch's apply). By default nothing is there. A probe
is named by a :class:`ProbeConfig` in the job spec, ``module:callable`` called with one
string argument, and loaded in the Spark driver: the repository's tests use one that pauses
or fails a job at a point (``devtools.pause_points``) to land writes in the low-watermark
race or to kill a job mid-commit; an operator could use one to trace. The Airflow tasks
take it from their worker's environment (:meth:`ProbeConfig.from_environment`): a test
hook, unset in production, and no setting of Airflow's ``[cdc]`` section.

Points of a chunk, in order: ``chunk_start``, ``after_low_watermark``, ``after_read``,
``before_commit``, ``files_written``, ``after_commit``. Of a stream batch:
``stream_before_apply``, ``stream_after_apply``; within it, before each merge of a table
applied in binlog order or of a joining table's replay: ``stream_in_order_merge``,
``stream_replay_merge``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, cast

from airflow_cdc.errors import ConfigurationError

__all__ = ["NO_PROBE", "PROBE_ARGUMENT_ENV", "PROBE_ENV", "Probe", "ProbeConfig"]

#: The environment variables of a worker that give the Airflow tasks' jobs a probe: its
#: ``module:callable`` and its argument.
PROBE_ENV = "AIRFLOW_CDC_PROBE"
PROBE_ARGUMENT_ENV = "AIRFLOW_CDC_PROBE_ARGUMENT"


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

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> ProbeConfig:
        """The probe :data:`PROBE_ENV` and :data:`PROBE_ARGUMENT_ENV` name, or none."""
        return cls(environ.get(PROBE_ENV, "").strip(), environ.get(PROBE_ARGUMENT_ENV, "").strip())

    def load(self) -> Probe:
        if not self.factory:
            return NO_PROBE
        module_name, _, attribute = self.factory.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as exc:
            raise ConfigurationError(
                f"probe factory {self.factory} cannot be loaded ({exc}): unset {PROBE_ENV}, or "
                "make its module importable by the Spark driver"
            ) from exc
        return cast(Callable[[str], Probe], factory)(self.argument)
