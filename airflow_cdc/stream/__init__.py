"""The stream: binlog changes after the snapshot into the sink (plain Python, no Spark).

Modules (imported on their own so that pure ones stay light):

* ``binlog_reader``: ``BinlogCursor`` / ``read_changes``: row changes of a set of tables
  between two positions, transaction boundaries, reconnects, purged-start detection;
* ``events`` / ``mysql_source``: the event source it reads (mysql-replication adapter);
* ``reduce``: ``reduce_to_latest``: the newest version per key of a batch;
* ``emit_filter``: ``EmitFilter``: Flink CDC's ``shouldEmit`` against chunk watermarks.
"""

__all__: list[str] = []
