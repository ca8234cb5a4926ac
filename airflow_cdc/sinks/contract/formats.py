"""The sink a configuration names, opened behind the :class:`~airflow_cdc.sinks.contract.base.Sink`
Protocol: the rest of the product never names a table format.

Delta Lake (:mod:`airflow_cdc.sinks.delta`) is the one format today; another would be a
sibling package of it, passing the same contract tests, and one more case here.
"""

from __future__ import annotations

from airflow_cdc.config import SinkConfig
from airflow_cdc.sinks.contract.base import Sink

__all__ = ["open_sink", "open_streaming_sink"]


def open_sink(config: SinkConfig, *, streaming: bool = False) -> Sink:
    """The sink at ``config``'s root, its routes applied (``sinks.routes.routed``). ``streaming``: as the stream writes it, a writer
    that comes back to the same tables batch after batch (tables kept open between calls,
    small batches written by rewriting the files they touch)."""
    from airflow_cdc.sinks.delta import DeltaSink
    from airflow_cdc.sinks.routes.routed import RoutedSink

    sink = DeltaSink.streaming(config) if streaming else DeltaSink.of(config)
    return RoutedSink(sink, config.routing, open_streaming_sink) if config.routing else sink


def open_streaming_sink(config: SinkConfig) -> Sink:
    """:func:`open_sink` as the stream writes it: how an executor opens a routed sink
    again (``sinks.routes.routed.run_routed_merge``)."""
    return open_sink(config, streaming=True)
