"""What of a table's columns reaches the lake: the columns left out, and the masks of the
others (issue 49's ``columns`` and ``masks``; Debezium's ``column.exclude.list`` and
``column.mask.*``).

The rules are given per table pattern (the forms of ``model.selection``) and resolved per
table against its schema (:meth:`LakeColumnRules.for_table`), which refuses what would
lose a row's identity or cannot be done to a column's type, naming the entry to change:

* ``columns``: ``{"<table pattern>": {"include": [...]}}`` or ``{"exclude": [...]}``. A
  column reaches the lake when every entry matching its table keeps it (an include list
  keeps only its columns, so a column added later is left out too). A key column cannot
  be left out.
* ``masks``: ``{"<table pattern>.<column>": "null" | "truncate:<n>" | "hash"}`` (the
  column is the part after the last dot; a name holding a dot is written in backticks).
  ``truncate`` keeps the first ``n`` characters, ``hash`` gives the keyed hash
  (HMAC-SHA256, hex) of the value's UTF-8 text: both are for text columns. ``null``
  suits any column but the key.

A rule names a column as the server compares column names, without case
(``model.column_names``): ``shop.*.Email`` masks the column ``email``. Every entry must
name something the run follows (``model.lake_rule_matches``, checked by the plan).

A key column takes ``hash`` only: the hash of a key is as unique as the key, so the lake's
rows keep their identity (updates and deletes find their row by the hashed key), while
``null`` and ``truncate`` would make rows one. A table whose key is hashed is *keyed by
hash* (:attr:`TableLakeColumns.keyed_by_hash`): its lake rows no longer say which chunk's
key range they lie in, which the parts that find lake rows by range take into account
(docs/architecture.md, "Hashed keys").

A table without a key is held as counts of its row images (``sinks.multiset.keyless``): the
images are those of the lake, so rows that differ only in what is left out or masked are
one image counted twice. Its chunking column is its key here: it cannot be left out or
masked.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import assert_never

from airflow_cdc.connection_ids import MASK_CONN_ID
from airflow_cdc.model.column_names import column_named, same_column_name
from airflow_cdc.model.selection import TablePattern
from airflow_cdc.model.table import TableId, TableSchema, _split_dotted, quote_identifier

__all__ = [
    "ALL_COLUMNS",
    "ColumnChoice",
    "LakeColumnRules",
    "Mask",
    "MaskKey",
    "MaskKind",
    "TableLakeColumns",
    "mask_entry",
]

#: Column types whose values are text (``information_schema`` DATA_TYPE): what ``truncate``
#: and ``hash`` take.
_TEXT_TYPES = frozenset(
    {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json"}
)
_TRUNCATE = "truncate:"


class MaskKind(enum.Enum):
    NULL = "null"
    TRUNCATE = "truncate"
    HASH = "hash"


@dataclass(frozen=True, slots=True)
class Mask:
    """One column's mask: ``null``, ``truncate:<n>`` (``length``: n) or ``hash``."""

    kind: MaskKind
    length: int = 0

    @classmethod
    def parse(cls, text: str) -> Mask:
        """Parse a mask's text; raises ``ValueError`` naming the accepted forms."""
        stripped = text.strip()
        if stripped == MaskKind.NULL.value:
            return cls(MaskKind.NULL)
        if stripped == MaskKind.HASH.value:
            return cls(MaskKind.HASH)
        if stripped.startswith(_TRUNCATE) and stripped[len(_TRUNCATE) :].isdigit():
            length = int(stripped[len(_TRUNCATE) :])
            if length > 0:
                return cls(MaskKind.TRUNCATE, length)
        raise ValueError(
            f"{text!r} is not a mask: give 'null', 'truncate:<n>' (n at least 1) or 'hash'"
        )

    @property
    def text(self) -> str:
        match self.kind:
            case MaskKind.TRUNCATE:
                return f"{_TRUNCATE}{self.length}"
            case MaskKind.NULL | MaskKind.HASH:
                return str(self.kind.value)
            case _:
                assert_never(self.kind)


@dataclass(frozen=True)
class MaskKey:
    """The key of ``hash`` masks: the mask connection's password (never shown: hidden
    from ``repr``)."""

    secret: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not self.secret:
            raise ValueError(
                f"the mask key is empty: set a password on the mask connection ({MASK_CONN_ID})"
            )


@dataclass(frozen=True, slots=True)
class ColumnChoice:
    """One ``columns`` entry: an include list (only those columns) or an exclude list."""

    include: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = ()

    @classmethod
    def parse(cls, entry: str, given: Mapping[str, Sequence[str]]) -> ColumnChoice:
        """``{"include": [...]}`` or ``{"exclude": [...]}`` of ``entry``'s pattern."""
        if not isinstance(given, Mapping) or set(given) not in ({"include"}, {"exclude"}):
            raise ValueError(
                f"columns of {entry!r}: give {{'include': [...]}} or {{'exclude': [...]}}, "
                f"not {given!r}"
            )
        ((kind, names),) = given.items()
        if isinstance(names, str) or not names or not all(isinstance(n, str) and n for n in names):
            raise ValueError(
                f"columns of {entry!r}: {kind} takes a list of column names (at least one)"
            )
        if kind == "include":
            return cls(include=tuple(names))
        return cls(exclude=tuple(names))

    @property
    def names(self) -> tuple[str, ...]:
        """The columns the entry names (included or excluded)."""
        return self.exclude if self.include is None else self.include

    def on(self, columns: Sequence[str]) -> ColumnChoice:
        """This choice with its names as ``columns`` (a table's) spell them
        (``model.column_names``); a name that is none of them is dropped."""
        spelled = (column_named(name, columns) for name in self.names)
        found = tuple(dict.fromkeys(name for name in spelled if name is not None))
        return ColumnChoice(exclude=found) if self.include is None else ColumnChoice(found)

    def keeps(self, name: str) -> bool:
        """Whether the column ``name`` stays (the choice's names spelled as the table's:
        :meth:`on`)."""
        if self.include is not None:
            return name in self.include
        return name not in self.exclude

    def as_dict(self) -> dict[str, list[str]]:
        if self.include is not None:
            return {"include": list(self.include)}
        return {"exclude": list(self.exclude)}


@dataclass(frozen=True, slots=True)
class TableLakeColumns:
    """One table's columns as the lake holds them: the source columns kept (in the
    table's order), those left out, and the masks of some kept ones."""

    kept: tuple[str, ...]
    left_out: tuple[str, ...] = ()
    masks: tuple[tuple[str, Mask], ...] = ()
    #: A key column is hashed: the lake's rows are found by the hashed key, never by a
    #: range of the source's keys (see the module docstring).
    keyed_by_hash: bool = False

    @property
    def is_plain(self) -> bool:
        """Every column as it is: nothing left out, nothing masked."""
        return not self.masks and not self.left_out

    def mask_of(self, name: str) -> Mask | None:
        return dict(self.masks).get(name)

    def project(self, schema: TableSchema) -> TableSchema:
        """``schema`` without the columns left out: the lake table's schema."""
        if not self.left_out:
            return schema
        left_out = set(self.left_out)
        return replace(schema, columns=tuple(c for c in schema.columns if c.name not in left_out))


@dataclass(frozen=True, slots=True)
class LakeColumnRules:
    """Every ``columns`` and ``masks`` entry, parsed; :data:`ALL_COLUMNS` has none."""

    columns: tuple[tuple[TablePattern, ColumnChoice], ...] = ()
    masks: tuple[tuple[TablePattern, str, Mask], ...] = ()

    @classmethod
    def parse(
        cls,
        columns: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
        masks: Mapping[str, str] | None = None,
    ) -> LakeColumnRules:
        """The rules from the DAG params' forms (module docstring); ``ValueError`` names
        the entry that is wrong."""
        parsed_columns = tuple(
            (TablePattern.parse(entry), ColumnChoice.parse(entry, given))
            for entry, given in (columns or {}).items()
        )
        parsed_masks = tuple(
            (*_split_mask_entry(entry), _parse_mask(entry, text))
            for entry, text in (masks or {}).items()
        )
        return cls(parsed_columns, parsed_masks)

    def texts(self) -> tuple[dict[str, dict[str, list[str]]], dict[str, str]]:
        """The rules in the form :meth:`parse` takes (what job files carry)."""
        columns = {pattern.text: choice.as_dict() for pattern, choice in self.columns}
        masks = {mask_entry(pattern, name): mask.text for pattern, name, mask in self.masks}
        return columns, masks

    def for_table(self, schema: TableSchema) -> TableLakeColumns:
        """``schema``'s columns as the lake holds them; ``ValueError`` when an entry would
        leave out or mask a key column (a keyless table's chunking column), masks a column left
        out or one of a type the mask does not take, or when two masks of a column differ."""
        matching = [(p, choice) for p, choice in self.columns if p.matches(schema.table)]
        names = [c.name for c in schema.columns]
        spelled = [choice.on(names) for _, choice in matching]
        kept = tuple(n for n in names if all(choice.keeps(n) for choice in spelled))
        left_out = tuple(n for n in names if n not in kept)
        masks = _masks_of(schema, self.masks)
        if not masks and not left_out:
            return TableLakeColumns(kept)
        _check_kept(schema, kept, matching)
        for name, mask in masks:
            _check_mask(schema, kept, name, mask)
        keyed_by_hash = not schema.keyless and self.keyed_by_hash(schema.table, schema.key)
        return TableLakeColumns(kept, left_out, masks, keyed_by_hash)

    def keyed_by_hash(self, table: TableId, key: Sequence[str]) -> bool:
        """Whether a ``hash`` mask of ``table`` names a column of ``key`` (its key
        columns): the table is keyed by hash, and its chunks' bounds, source key values,
        are not shown (``Chunk.label``)."""
        return any(
            pattern.matches(table)
            and mask.kind is MaskKind.HASH
            and any(same_column_name(name, column) for column in key)
            for pattern, name, mask in self.masks
        )

    @property
    def hashes(self) -> bool:
        """Whether a mask is ``hash`` (the rules then need the mask key)."""
        return any(mask.kind is MaskKind.HASH for _, _, mask in self.masks)


ALL_COLUMNS = LakeColumnRules()


def mask_entry(pattern: TablePattern, name: str) -> str:
    """The ``masks`` entry of ``pattern``'s column ``name``, as :meth:`LakeColumnRules.parse`
    takes it (a name holding a dot in backticks)."""
    return f"{pattern.text}.{quote_identifier(name) if '.' in name else name}"


def _split_mask_entry(entry: str) -> tuple[TablePattern, str]:
    """``<table pattern>.<column>`` split at its last dot outside backticks."""
    text = entry.strip()
    last, quoted = -1, False
    for i, ch in enumerate(text):
        if ch == "`":
            quoted = not quoted
        elif ch == "." and not quoted:
            last = i
    column = _split_dotted(text[last + 1 :])[0] if last > 0 else ""
    head = text[:last] if last > 0 else ""
    if not column or ("." not in head and not head.startswith("re:")):
        raise ValueError(
            f"mask {entry!r}: name a column as '<table pattern>.<column>', e.g. 'shop.people.email'"
        )
    return TablePattern.parse(head), column


def _parse_mask(entry: str, text: str) -> Mask:
    try:
        return Mask.parse(text)
    except ValueError as exc:
        raise ValueError(f"mask of {entry!r}: {exc}") from None


def _masks_of(
    schema: TableSchema, entries: Sequence[tuple[TablePattern, str, Mask]]
) -> tuple[tuple[str, Mask], ...]:
    """The masks of ``schema``'s columns, in the table's column order."""
    names = [c.name for c in schema.columns]
    found: dict[str, Mask] = {}
    for pattern, given, mask in entries:
        if not pattern.matches(schema.table):
            continue
        name = column_named(given, names)
        if name is None:
            if pattern.exact_table is not None:
                raise ValueError(f"a mask names a column {schema.table} does not have: {given!r}")
            continue
        if name in found and found[name] != mask:
            raise ValueError(
                f"{schema.table}.{name} has two masks ({found[name].text!r} and "
                f"{mask.text!r}): keep one of the entries that match it"
            )
        found[name] = mask
    return tuple((name, found[name]) for name in names if name in found)


def _check_kept(
    schema: TableSchema,
    kept: tuple[str, ...],
    matching: list[tuple[TablePattern, ColumnChoice]],
) -> None:
    """The key kept; an entry naming one table includes only columns it has (an entry of
    a pattern names the columns of several tables, each may lack some)."""
    left_out = [name for name in schema.key if name not in kept]
    if left_out:
        raise ValueError(
            f"the key of {schema.table} ({', '.join(schema.key)}) must reach the lake, but "
            f"'columns' leaves out {left_out}: keep them (a row is found by its key)"
        )
    names = [c.name for c in schema.columns]
    for pattern, choice in matching:
        if pattern.exact_table is None:
            continue
        unknown = sorted(n for n in choice.include or () if column_named(n, names) is None)
        if unknown:
            raise ValueError(f"'columns' includes columns {schema.table} does not have: {unknown}")


def _check_mask(schema: TableSchema, kept: tuple[str, ...], name: str, mask: Mask) -> None:
    where = f"the mask {mask.text!r} of {schema.table}.{name}"
    if name in schema.key and schema.keyless:
        raise ValueError(
            f"{where}: {schema.table} has no key and is chunked by this column, which "
            "cannot be masked; drop the entry"
        )
    if name in schema.key and mask.kind is not MaskKind.HASH:
        raise ValueError(
            f"{where}: a key column takes 'hash' only (with {mask.text!r} rows would become "
            "one; a hash keeps them apart); change the entry"
        )
    if name not in kept:
        raise ValueError(f"{where}: 'columns' leaves the column out; drop one of the two")
    column = schema.column(name)
    if mask.kind is not MaskKind.NULL and column.data_type not in _TEXT_TYPES:
        raise ValueError(
            f"{where}: the column is {column.column_type!r}; {mask.kind.value!r} takes text "
            "columns only ('null' takes any)"
        )
