"""What of the followed tables' columns reaches the lake: ``columns`` and ``masks`` (the
rules: ``model.lake_columns``), the key of ``hash`` masks, and whether the lake tables
have the change metadata columns (``_cdc_op``, ``_cdc_commit_ts``: ``sinks.contract.cdc_columns``)."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from airflow_cdc.connection_ids import MASK_CONN_ID
from airflow_cdc.errors import ConfigurationError
from airflow_cdc.model import TableId, TableOptions, TableSchema
from airflow_cdc.model.lake_columns import LakeColumnRules, MaskKey, TableLakeColumns
from airflow_cdc.model.lake_record import LakeRecord
from airflow_cdc.model.lake_rule_matches import check_entries_match

__all__ = ["LakeColumnsConfig", "parse_lake_rules"]


def parse_lake_rules(
    columns: Mapping[str, Mapping[str, Sequence[str]]], masks: Mapping[str, str]
) -> LakeColumnRules:
    """``LakeColumnRules.parse``, a wrong entry as a :class:`ConfigurationError`."""
    try:
        return LakeColumnRules.parse(columns, masks)
    except ValueError as exc:
        raise _naming_the_settings(exc) from None


def _naming_the_settings(exc: ValueError) -> ConfigurationError:
    """A rule's refusal as the settings' error."""
    return ConfigurationError(f"{exc} (the 'columns' and 'masks' settings)")


@dataclass(frozen=True)
class LakeColumnsConfig:
    """``columns`` (per table pattern, ``{"include": [...]}`` or ``{"exclude": [...]}``),
    ``masks`` (per ``<table pattern>.<column>``: ``null``, ``truncate:<n>``, ``hash``) and
    the mask key (secret: hidden from ``repr``, carried by job files only);
    ``change_metadata``: the lake tables of keyed source tables have ``_cdc_op`` and
    ``_cdc_commit_ts``."""

    columns: Mapping[str, Mapping[str, Sequence[str]]] = field(default_factory=dict)
    masks: Mapping[str, str] = field(default_factory=dict)
    mask_key: str = field(default="", repr=False)
    change_metadata: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", {k: dict(v) for k, v in self.columns.items()})
        object.__setattr__(self, "masks", dict(self.masks))
        if self.rules.hashes and not self.mask_key:
            raise ConfigurationError(
                "a 'hash' mask needs a key: set a password on the mask connection "
                f"({MASK_CONN_ID} by default)"
            )

    @functools.cached_property
    def rules(self) -> LakeColumnRules:
        return parse_lake_rules(self.columns, self.masks)

    @property
    def key(self) -> MaskKey | None:
        return MaskKey(self.mask_key.encode("utf-8")) if self.mask_key else None

    @property
    def is_plain(self) -> bool:
        """No rule: every column of every table reaches the lake as it is."""
        return not self.columns and not self.masks

    def for_table(self, schema: TableSchema) -> TableLakeColumns:
        """``schema``'s columns as the lake holds them; :class:`ConfigurationError` naming
        the entry to change when the rules cannot apply to it."""
        if self.is_plain:
            return TableLakeColumns(tuple(c.name for c in schema.columns))
        try:
            return self.rules.for_table(schema)
        except ValueError as exc:
            raise _naming_the_settings(exc) from None

    def check_matches(self, tables: Mapping[TableId, Sequence[str]]) -> None:
        """:class:`ConfigurationError` naming every entry that matches nothing of
        ``tables``, the tables a run follows with their columns
        (``model.lake_rule_matches``)."""
        try:
            check_entries_match(self.rules, tables)
        except ValueError as exc:
            raise _naming_the_settings(exc) from None

    def keyed_by_hash(self, schemas: Iterable[TableSchema]) -> frozenset[TableId]:
        """The tables among ``schemas`` whose lake key is hashed
        (``TableLakeColumns.keyed_by_hash``)."""
        if not self.masks:
            return frozenset()
        return frozenset(s.table for s in schemas if self.for_table(s).keyed_by_hash)

    def table_options(self, lake: TableLakeColumns, bucket_width: int | None) -> TableOptions:
        """How a writer asks for a lake table whose rules ``for_table`` resolved as
        ``lake``: with the change metadata columns if set, recording the rules."""
        return TableOptions(bucket_width, self.change_metadata, self.record_of(lake))

    def record_of(self, lake: TableLakeColumns) -> str:
        """What a lake table records of these rules (``model.lake_record``), as its
        writers give it to the sink; ``lake``: the table's rules, as :meth:`for_table`
        resolved them."""
        return LakeRecord.of(lake, self.key).to_text()
