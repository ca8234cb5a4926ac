"""A change of a table's columns as the lake sees it (pure but for the masks' hashing):
the steps of an :class:`~airflow_cdc.stream.schema_evolution.Evolution` kept for the
columns that reach the lake (``model.lake_columns``), a column's older rows filled with
its masked value, and the table read again where the lake gains a column whose values it
never held.

* ``ADD COLUMN`` of a column left out: nothing; of a masked one: the fill masked;
* ``DROP COLUMN`` of a column left out: nothing;
* a rename (or retype) of a column that stays left out: nothing; out of the lake (the new
  name is left out): the lake drops it; into the lake (the old name was left out), or with
  another mask: the lake takes the column and the table's rows are read again, so no row
  keeps a value of the old rule.
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa

from airflow_cdc.model.lake_columns import MaskKey, TableLakeColumns
from airflow_cdc.source.arrow_types import arrow_type
from airflow_cdc.source.masking import masked_array
from airflow_cdc.stream.schema_evolution import (
    AddColumn,
    ChangeColumn,
    DropColumn,
    Evolution,
    SinkStep,
)

__all__ = ["lake_evolution"]


def lake_evolution(
    evolution: Evolution,
    before: TableLakeColumns,
    after: TableLakeColumns,
    key: MaskKey | None,
) -> Evolution:
    """``evolution``'s steps for the lake, whose columns are ``before`` the change and
    ``after`` it (module docstring); the same evolution when both are plain."""
    if before.is_plain and after.is_plain:
        return evolution
    steps: list[SinkStep] = []
    read_again = evolution.read_again
    for step in evolution.steps:
        if isinstance(step, AddColumn):
            if step.column.name in after.kept:
                steps.append(_masked_fill(step, after, key))
        elif isinstance(step, DropColumn):
            if step.name in before.kept:
                steps.append(step)
        else:
            kept_before, kept_after = step.old in before.kept, step.new in after.kept
            if kept_before and kept_after and before.mask_of(step.old) == after.mask_of(step.new):
                steps.append(step)
            elif kept_before and not kept_after:
                steps.append(DropColumn(step.old))
            elif kept_after:
                steps += _taken_in(step, before, evolution)
                read_again = read_again or (
                    f"column {step.old} renamed to {step.new} now reaches the lake with "
                    f"another rule ('columns' or 'masks'): the rows are read again"
                )
    return dataclasses.replace(evolution, steps=tuple(steps), read_again=read_again)


def _masked_fill(step: AddColumn, after: TableLakeColumns, key: MaskKey | None) -> AddColumn:
    mask = after.mask_of(step.column.name)
    if mask is None or step.fill is None:
        return step
    fill = masked_array(pa.array([step.fill], arrow_type(step.column)), mask, key)
    return dataclasses.replace(step, fill=fill.to_pylist()[0])


def _taken_in(step: ChangeColumn, before: TableLakeColumns, evolution: Evolution) -> list[SinkStep]:
    """A column renamed into the lake: added empty (dropped first under its old name when
    the lake held it with another mask); its values come with the rows read again."""
    column = evolution.schema.column(step.new)
    dropped: list[SinkStep] = [DropColumn(step.old)] if step.old in before.kept else []
    return [*dropped, AddColumn(column, None)]
