"""MySQL/MariaDB access: connections (``connection``), server facts (``server``),
readiness (``validation``, ``grants``), read views and low watermarks (``watermark``),
keyset SQL (``keyset``, ``classify``), and three packages: ``catalog`` (the tables as
``information_schema`` has them), ``binlog`` (reading it: ``binlog.reader`` over
``binlog.mysql_replication``, the decoders, where to cut it) and ``ddl`` (what a DDL
statement does). With them the one mapping of column types to Arrow (``arrow_types``) and
the row-image screening (``schema_check``) that the snapshot and the stream share."""
