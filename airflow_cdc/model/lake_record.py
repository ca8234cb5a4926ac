"""What a lake table records of the rules its rows were written under (``columns``,
``masks`` and the mask key: ``model.lake_columns``), so that a writer given other rules is
refused instead of writing rows of another shape into it: every task of a pipeline must be
given the same rules, and the DAG form lets a user edit them for one run.

The record is per column: kept as it is, left out, or its mask; and, when a column is
hashed, a check of the key (an HMAC of a fixed text under it: it tells two keys apart and
gives away nothing of the key or of any value). A writer's rules differ from the
record on a column both name and treat differently, or in the key when both hash a column
they both name. A column only one of them names (added or dropped since) is the schema
changes' business (``stream.lake_steps``), not this.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from airflow_cdc.model.lake_columns import MaskKey, MaskKind, TableLakeColumns

__all__ = ["AS_IT_IS", "LEFT_OUT", "LakeRecord", "key_check"]

AS_IT_IS, LEFT_OUT = "as it is", "left out"
_HASH = MaskKind.HASH.value
_CHECKED = b"airflow-cdc: the check of a mask key"


def key_check(key: MaskKey) -> str:
    """A short check of ``key``: equal for one key, different for two (HMAC-SHA256 of a
    fixed text, 16 hex digits)."""
    return hmac.new(key.secret, _CHECKED, hashlib.sha256).hexdigest()[:16]


@dataclass(frozen=True)
class LakeRecord:
    """Per column of the table: :data:`AS_IT_IS`, :data:`LEFT_OUT` or its mask's text;
    and the mask key's check when a column is hashed."""

    columns: Mapping[str, str] = field(default_factory=dict)
    key_check: str = ""

    @classmethod
    def of(cls, lake: TableLakeColumns, key: MaskKey | None) -> LakeRecord:
        """The record of a table's resolved rules (``key``: needed when a column is hashed)."""
        masks = {name: mask.text for name, mask in lake.masks}
        columns = {name: masks.get(name, AS_IT_IS) for name in lake.kept}
        columns.update(dict.fromkeys(lake.left_out, LEFT_OUT))
        hashed = _HASH in columns.values()
        return cls(columns, key_check(key) if hashed and key is not None else "")

    def to_text(self) -> str:
        return json.dumps({"columns": dict(self.columns), "key": self.key_check}, sort_keys=True)

    @classmethod
    def from_text(cls, text: str) -> LakeRecord:
        """The record :meth:`to_text` wrote; ``ValueError`` for anything else."""
        try:
            data = json.loads(text)
            columns, check = data["columns"], data["key"]
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"not a record of a lake table's rules: {text!r}") from exc
        if not isinstance(columns, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in columns.items()
        ):
            raise ValueError(f"not a record of a lake table's rules: {text!r}")
        return cls(columns, str(check))

    def differences(self, given: LakeRecord) -> list[str]:
        """How ``given`` (a writer's rules) differs from this record (what the table was
        written with), column by column (module docstring); empty: the same."""
        common = [name for name in self.columns if name in given.columns]
        found = [
            f"{name}: written {self.columns[name]}, given {given.columns[name]}"
            for name in common
            if self.columns[name] != given.columns[name]
        ]
        hashed = [n for n in common if self.columns[n] == given.columns[n] == _HASH]
        if hashed and self.key_check != given.key_check:
            found.append(f"{', '.join(hashed)}: hashed with another mask key")
        return found
