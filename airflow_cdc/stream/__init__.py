"""The stream: binlog changes after the snapshot into the sink (plain Python, no Spark).

Modules (imported on their own so that pure ones stay light):

* ``emit_filter``: ``EmitFilter``: Flink CDC's ``shouldEmit`` against chunk watermarks;
* ``reduce`` / ``apply``: a slice reduced to the newest row per key, a batch applied;
* ``joining`` / ``discovery`` / ``start``: tables joining a running stream, where it starts;
* ``staging`` / ``lease``: blocks handed to the driver, one stream per set of tables.

Reading the binlog itself is ``source.binlog.reader``'s, shared with the snapshot's
correction window.
"""

__all__: list[str] = []
