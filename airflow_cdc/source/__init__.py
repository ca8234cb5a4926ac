"""MySQL/MariaDB access: connections, server facts, validation, catalog, read views, keyset
SQL, and the binlog (``binlog_reader`` over ``mysql_replication``, ``row_decoder``), with the
one mapping of column types to Arrow (``arrow_types``) and the row-image screening
(``schema_check``) that the snapshot and the stream share."""
