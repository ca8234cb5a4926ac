"""The fingerprint of a row with ``hash``-masked columns, and its identity's text, put
together in the verify process (pure).

The source server cannot compute a ``hash`` mask: that takes the mask key, and nothing the
key can be recovered from ever goes to the server. So a row with hashed columns is
fingerprinted in two steps, the same on both sides (``verify.canonical``):

1. the MD5 (32 hex digits) of the canonical text of its other columns (the server computes
   it, ``canonical.mysql_plain_digest``; DuckDB over the lake);
2. the first 64 bits of the MD5 of that digest, ``|``, and the hashed columns' parts
   joined by ``|`` in the table's order: each the HMAC hex (``source.masking.hash_text``,
   the snapshot's own masking) as a text's part, its length, ``:`` and the hex, or ``N``
   for NULL.

The digest has a fixed width and each part says where it ends, so the text reads back one
way: two rows have one text only when their other columns' texts have one digest and their
hashed values are equal. A row's identity text is its identity columns' parts joined by
``|``, as the server joins them (``CONCAT_WS``): the server's parts of the columns it can
compute, the verify process's of the hashed ones; its digest places it in a prefix
(``verify.digest_prefixes``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

__all__ = ["fingerprints", "identity_digest", "joined", "row_fingerprint", "text_part"]


def text_part(value: str | None, *, free: bool) -> str:
    """A value's part of a canonical text: ``N`` for NULL; a free text's length in
    characters, ``:``, the text; else the text (``canonical._mysql_part``)."""
    if value is None:
        return "N"
    return f"{len(value)}:{value}" if free else value


def joined(parts: Sequence[str]) -> str:
    """Parts joined into a canonical text (the server's ``CONCAT_WS('|', ...)``)."""
    return "|".join(parts)


def row_fingerprint(plain_digest: str, hashed_parts: Sequence[str]) -> int:
    """The row's 64-bit fingerprint from the MD5 hex of its other columns' text and its
    hashed columns' parts (see the module docstring)."""
    text = f"{plain_digest}|{joined(hashed_parts)}"
    return int(hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()[:16], 16)


def fingerprints(digests: Sequence[str], parts: Sequence[Sequence[str]]) -> list[int]:
    """:func:`row_fingerprint` of each row of a batch: ``digests[n]`` and ``parts[i][n]``
    (hashed column ``i`` of row ``n``)."""
    if len(parts) != 1:
        rows = zip(*parts, strict=True) if parts else ([] for _ in digests)
        return [row_fingerprint(d, row) for d, row in zip(digests, rows, strict=True)]
    md5 = hashlib.md5  # one hashed column (the common case) without a list per row
    return [
        int(md5(f"{d}|{p}".encode(), usedforsecurity=False).hexdigest()[:16], 16)
        for d, p in zip(digests, parts[0], strict=True)
    ]


def identity_digest(text: str) -> str:
    """The MD5 (hex) of an identity's canonical text (``canonical.mysql_key_digest``)."""
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()
