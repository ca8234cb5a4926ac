"""The binlog: row changes and DDL read from it, and where to read.

* reading: ``reader`` (``BinlogCursor``, ``read_changes``: positions, transaction
  boundaries, reconnects) over an event source, ``events`` (what a source hands the
  cursor), ``mysql_replication`` (the source over the mysql-replication library; only it,
  ``library_rows``, ``transaction_cut``, ``gtid`` and ``start_search`` import the library);
* decoding row events: ``library_rows`` (the library's row events into the cursor's),
  ``row_decoder`` (row images read straight from the event's bytes), ``row_scan`` (where
  each value starts), ``column_decoder`` (whole columns at once with numpy),
  ``stored_sizes`` (skipping the values a before-image does not need);
* where to read: ``boundaries`` (transaction boundaries near byte offsets, to cut a range
  into slices), ``transaction_cut`` (a dump opened at a cut inside a transaction), ``gtid``
  (GTID states at positions, and a position from a GTID state on another server),
  ``start_search`` (where a stream starts from a time, a ``file:offset`` or a GTID position
  the user gave, with its pure rules in ``start_rules``).

Empty on purpose: a worker importing a light part (``row_decoder``) loads nothing else.
"""
