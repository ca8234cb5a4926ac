"""Verify and repair: does a table's replica equal its source, and which keys differ?

The rules: ``canonical`` (one row's fingerprint, the same SQL on the server and DuckDB
over the lake), ``sums`` (rows summed by fingerprint, order-free and subtractable),
``prefixes`` (keys placed by their digest; narrowing a difference down to keys). The two
sides: ``source_side`` (read views summing ranges on the server) and ``lake_side`` (a Delta
version summed with DuckDB). ``check`` compares them at a common point; ``repair`` turns
the keys found into key ranges the chunk path re-snapshots.
"""

__all__: list[str] = []
