"""Keyless tables, kept as a multiset of rows with a count each: the position rule on
counts (``count_fold``), in the form a sink applies it to Arrow tables (``count_rows``), a
keyless table's lake layout (``keyless``), and a row's identity (``row_hash``).
"""
