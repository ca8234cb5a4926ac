"""The contract every sink keeps, whatever its format:

* the ``Sink`` Protocol and what it returns: ``base``; the sink's own columns:
  ``cdc_columns``; a stream batch as the sink takes it: ``change_batches``, and one table's
  merge over any sink: ``table_merge``;
* the rule every keyed writer follows: ``last_writer_wins``;
* what every sink refuses: ``conform``; a change of columns as Arrow: ``columns_change``;
  names in paths and SQL: ``naming``;
* the sink a configuration names, opened: ``formats``.
"""
