"""``stream.schema_evolution``: column changes carried over to the replica in place (pure)."""

from __future__ import annotations

import dataclasses
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.model import BinlogPosition, Column, DdlKind, SchemaChange, TableId, TableSchema
from airflow_cdc.sinks.contract.columns_change import AddedColumn, ColumnsChange, widens
from airflow_cdc.stream.schema_evolution import (
    AddColumn,
    ChangeColumn,
    DropColumn,
    Evolution,
    NotInPlace,
    evolve,
    evolve_statement,
)

T = TableId("db", "t")


def col(name: str, column_type: str, *, nullable: bool = True) -> Column:
    data_type = column_type.split("(")[0].split()[0]
    precision = scale = None
    if data_type == "decimal":
        precision, scale = (int(p) for p in column_type[8:-1].split(","))
    return Column(name, data_type, column_type, nullable, precision, scale)


BEFORE = TableSchema(
    T,
    (
        col("id", "int(11)", nullable=False),
        col("n", "int(11)"),
        col("s", "varchar(10)"),
        col("d", "decimal(10,2)"),
        col("f", "float"),
    ),
    ("id",),
)


def catalog(*changes: tuple[str, Column | None]) -> TableSchema:
    """BEFORE with columns replaced (None: removed) or added."""
    columns = {c.name: c for c in BEFORE.columns}
    for name, column in changes:
        if column is None:
            columns.pop(name)
        else:
            columns[name] = column
    return dataclasses.replace(BEFORE, columns=tuple(columns.values()))


def change(kind: DdlKind, column: str, **fields: str) -> SchemaChange:
    return SchemaChange(kind, T, column, **fields)  # type: ignore[arg-type]


def test_an_added_nullable_column_is_null_in_older_rows() -> None:
    c = col("c", "varchar(20)")
    found = evolve(
        BEFORE, change(DdlKind.ADD_COLUMN, "c", definition="VARCHAR(20)"), catalog(("c", c))
    )
    assert found == Evolution(
        dataclasses.replace(BEFORE, columns=(*BEFORE.columns, c)), (AddColumn(c, None),)
    )


def test_an_added_column_with_a_constant_default_fills_older_rows() -> None:
    c = col("c", "decimal(6,1)", nullable=False)
    found = evolve(
        BEFORE,
        change(DdlKind.ADD_COLUMN, "c", definition="DECIMAL(6, 1)", default="2.5"),
        catalog(("c", c)),
    )
    assert isinstance(found, Evolution)
    assert found.steps == (AddColumn(c, Decimal("2.5")),)


@pytest.mark.parametrize(
    ("statement", "catalog_now"),
    [
        # The catalog moved on: c is BIGINT by a later ALTER.
        (change(DdlKind.ADD_COLUMN, "c", definition="INT"), catalog(("c", col("c", "bigint(20)")))),
        # ... or c is gone again.
        (change(DdlKind.ADD_COLUMN, "c", definition="INT"), BEFORE),
        (change(DdlKind.ADD_COLUMN, "n", definition="INT"), BEFORE),  # there already
        (change(DdlKind.MODIFY_COLUMN, "n", definition="BIGINT"), BEFORE),  # moved on
        (change(DdlKind.MODIFY_COLUMN, "s", definition="INT"), catalog(("s", col("s", "int(11)")))),
        (
            change(DdlKind.MODIFY_COLUMN, "n", definition="SMALLINT"),
            catalog(("n", col("n", "smallint(6)"))),
        ),
        (
            change(DdlKind.MODIFY_COLUMN, "d", definition="DECIMAL(12, 1)"),
            catalog(("d", col("d", "decimal(12,1)"))),
        ),
        (
            change(DdlKind.RENAME_COLUMN, "id", new_name="key"),
            catalog(("id", None), ("key", BEFORE.column("id"))),
        ),
        (change(DdlKind.DROP_COLUMN, "id"), catalog(("id", None))),
        (SchemaChange(DdlKind.PRIMARY_KEY, T), BEFORE),
        (SchemaChange(DdlKind.UNKNOWN, T), catalog(("n", col("n", "bigint(20)")))),
    ],
)
def test_what_cannot_be_made_exact_is_not_in_place(
    statement: SchemaChange, catalog_now: TableSchema
) -> None:
    assert isinstance(evolve(BEFORE, statement, catalog_now), NotInPlace)


@pytest.mark.parametrize(
    ("column", "definition", "new_type", "to"),
    [
        ("n", "BIGINT", "bigint(20)", pa.int64()),
        ("s", "VARCHAR(200)", "varchar(200)", None),  # the same Arrow type: nothing to write
        ("d", "DECIMAL(14, 4)", "decimal(14,4)", pa.decimal128(14, 4)),
        ("f", "DOUBLE", "double", pa.float64()),
        ("n", "INT", "int(11)", None),  # e.g. NULL -> NOT NULL
    ],
)
def test_a_widening_modify_retypes_the_column(
    column: str, definition: str, new_type: str, to: pa.DataType | None
) -> None:
    new = col(column, new_type)
    found = evolve(
        BEFORE, change(DdlKind.MODIFY_COLUMN, column, definition=definition), catalog((column, new))
    )
    assert isinstance(found, Evolution)
    assert found.schema.column(column) == new
    assert found.steps == ((ChangeColumn(column, column, to),) if to is not None else ())


def test_a_rename_keeps_the_values_under_the_new_name() -> None:
    renamed = dataclasses.replace(BEFORE.column("s"), name="label")
    found = evolve(
        BEFORE,
        change(DdlKind.RENAME_COLUMN, "s", new_name="label"),
        catalog(("s", None), ("label", renamed)),
    )
    assert isinstance(found, Evolution)
    assert [c.name for c in found.schema.columns] == ["id", "n", "label", "d", "f"]
    assert found.steps == (ChangeColumn("s", "label", None),)


def test_a_change_that_renames_and_widens_does_both() -> None:
    wide = col("total", "bigint(20)")
    found = evolve(
        BEFORE,
        change(DdlKind.RENAME_COLUMN, "n", new_name="total", definition="BIGINT"),
        catalog(("n", None), ("total", wide)),
    )
    assert isinstance(found, Evolution)
    assert found.steps == (ChangeColumn("n", "total", pa.int64()),)


def test_a_dropped_column_leaves_the_schema() -> None:
    found = evolve(BEFORE, change(DdlKind.DROP_COLUMN, "d"), catalog(("d", None)))
    assert isinstance(found, Evolution)
    assert [c.name for c in found.schema.columns] == ["id", "n", "s", "f"]
    assert found.steps == (DropColumn("d"),)


def test_unreadable_ddl_is_never_carried_over_in_place() -> None:
    """Whether it changed rows cannot be told, even when the columns look the same."""
    assert isinstance(evolve(BEFORE, SchemaChange(DdlKind.UNKNOWN, T), BEFORE), NotInPlace)


def test_a_conditional_change_that_found_nothing_to_do_is_nothing() -> None:
    there = SchemaChange(DdlKind.ADD_COLUMN, T, "n", definition="INT", conditional=True)
    missing = SchemaChange(DdlKind.DROP_COLUMN, T, "nope", conditional=True)
    assert evolve(BEFORE, there, BEFORE) == Evolution(BEFORE, ())
    assert evolve(BEFORE, missing, BEFORE) == Evolution(BEFORE, ())
    plain = SchemaChange(DdlKind.ADD_COLUMN, T, "n", definition="INT")
    assert isinstance(evolve(BEFORE, plain, BEFORE), NotInPlace)


def test_a_conversion_takes_the_text_columns_where_the_delta_type_stays() -> None:
    convert = SchemaChange(DdlKind.CONVERT_CHARSET, T)
    texts = [c for c in BEFORE.columns if c.data_type in ("varchar", "char", "text")]
    assert texts, "the schema has a text column"
    converted = dataclasses.replace(
        BEFORE,
        columns=tuple(
            dataclasses.replace(c, charset="utf8mb4", collation="utf8mb4_general_ci")
            if c in texts
            else c
            for c in BEFORE.columns
        ),
    )
    found = evolve(BEFORE, convert, converted)
    assert found == Evolution(converted, ())
    retyped = dataclasses.replace(
        BEFORE,
        columns=tuple(
            dataclasses.replace(c, data_type="int", column_type="int(11)") if c in texts else c
            for c in BEFORE.columns
        ),
    )
    assert isinstance(evolve(BEFORE, convert, retyped), NotInPlace)


NUMERIC_TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.float32(), pa.float64()] + [
    pa.decimal128(p, s) for p in (3, 10, 14, 20, 38) for s in (0, 2, 4) if s <= p
]
#: Every pair ``widens`` accepts: the test below checks each (no example thrown away).
WIDENINGS = [(old, new) for old in NUMERIC_TYPES for new in NUMERIC_TYPES if widens(old, new)]


def _values(kind: pa.DataType) -> st.SearchStrategy[object]:
    if pa.types.is_integer(kind):
        bits = kind.bit_width - 1
        return st.integers(-(2**bits), 2**bits - 1)
    if pa.types.is_floating(kind):
        return st.floats(width=kind.bit_width, allow_nan=False)
    digits = kind.precision - kind.scale
    return st.decimals(
        min_value=-(10**digits) + 1,
        max_value=10**digits - 1,
        places=kind.scale,
        allow_nan=False,
        allow_infinity=False,
    )


def _extremes(kind: pa.DataType) -> list[object]:
    """The values a narrowing loses first (drawn values are mostly small)."""
    if pa.types.is_integer(kind):
        bits = kind.bit_width - 1
        return [-(2**bits), 2**bits - 1]
    if pa.types.is_floating(kind):
        info = np.finfo(np.float32 if kind.bit_width == 32 else np.float64)
        return [float(info.max), -float(info.max), float(info.smallest_subnormal), 1 / 3]
    top = Decimal(f"{10**kind.precision - 1}e-{kind.scale}")  # exact (scaleb would round)
    return [top, top.copy_negate(), Decimal(f"1e-{kind.scale}")]


def test_the_widenings_include_each_kind() -> None:
    # Else the test below could pass by checking nothing worth checking.
    assert (pa.int8(), pa.int64()) in WIDENINGS
    assert (pa.float32(), pa.float64()) in WIDENINGS
    assert (pa.int32(), pa.decimal128(20, 2)) in WIDENINGS
    assert (pa.decimal128(10, 2), pa.decimal128(14, 4)) in WIDENINGS
    assert (pa.int64(), pa.int32()) not in WIDENINGS


def _round_trip(old: pa.DataType, new: pa.DataType, values: list[object]) -> None:
    column = pa.array(values, old)
    try:
        back = column.cast(new, safe=True).cast(old, safe=True)
    except pa.ArrowInvalid as exc:
        raise AssertionError(f"{old} -> {new}: {exc}") from exc
    assert back.equals(column), f"{old} -> {new}"


def test_a_widening_keeps_the_extreme_values() -> None:
    """Whatever ``widens`` accepts keeps the old type's largest, smallest and finest values
    through the rewrite's safe cast and back (each accepted pair)."""
    for old, new in WIDENINGS:
        _round_trip(old, new, _extremes(old))


@settings(deadline=None, max_examples=30)
@given(st.data())
def test_a_widening_keeps_every_value(data: st.DataObject) -> None:
    """Whatever ``widens`` accepts, every value of the old type casts to the new one and
    back unchanged (each accepted pair, every example)."""
    for old, new in WIDENINGS:
        _round_trip(old, new, data.draw(st.lists(_values(old), max_size=8)))


AT = BinlogPosition("mysql-bin.000004", 900)


def test_a_statements_changes_make_one_evolution_and_one_sink_change() -> None:
    """``ALTER TABLE t CHANGE n total BIGINT, ADD c INT DEFAULT 3, DROP d``: each change
    checked against the columns the previous ones left, one change for the sink."""
    wide, c = col("total", "bigint(20)"), col("c", "int(11)")
    catalog_now = catalog(("n", None), ("total", wide), ("d", None), ("c", c))
    found = evolve_statement(
        BEFORE,
        [
            change(DdlKind.RENAME_COLUMN, "n", new_name="total", definition="BIGINT"),
            change(DdlKind.ADD_COLUMN, "c", definition="INT", default="3"),
            change(DdlKind.DROP_COLUMN, "d"),
        ],
        catalog_now,
    )
    assert isinstance(found, Evolution)
    assert [x.name for x in found.schema.columns] == ["id", "total", "s", "f", "c"]
    sink = found.sink_change(AT, keep_dropped=True)
    assert sink == ColumnsChange(
        AT,
        added=(AddedColumn(pa.field("c", pa.int32()), 3),),
        renamed=(("n", "total"),),
        retyped=(("total", pa.int64()),),
        dropped=("d",),
        keep_dropped=True,
    )
    assert Evolution(BEFORE, ()).sink_change(AT, keep_dropped=True) is None
    # One change that cannot be made exact makes the statement so.
    assert isinstance(
        evolve_statement(
            BEFORE, [change(DdlKind.DROP_COLUMN, "d"), change(DdlKind.DROP_COLUMN, "id")], BEFORE
        ),
        NotInPlace,
    )


def test_renames_one_after_another_reach_the_sink_as_one() -> None:
    steps = (ChangeColumn("n", "m", None), ChangeColumn("m", "k", pa.int64()))
    sink = Evolution(BEFORE, steps).sink_change(AT, keep_dropped=False)
    assert sink is not None
    assert (sink.renamed, sink.retyped) == ((("n", "k"),), (("k", pa.int64()),))


def test_an_added_column_whose_default_the_server_computes_asks_for_the_rows_again() -> None:
    """``ADD c DATETIME DEFAULT CURRENT_TIMESTAMP``: the older rows hold the time of the
    ALTER, which no statement tells: the column is added NULL and the table read again."""
    c = col("c", "datetime")
    found = evolve(
        BEFORE,
        change(DdlKind.ADD_COLUMN, "c", definition="DATETIME", default="CURRENT_TIMESTAMP()"),
        catalog(("c", c)),
    )
    assert isinstance(found, Evolution)
    assert found.steps == (AddColumn(c, None),)
    assert found.read_again is not None
    assert "computed by the server" in found.read_again
    statement = evolve_statement(
        BEFORE,
        [
            change(DdlKind.ADD_COLUMN, "c", definition="DATETIME", default="CURRENT_TIMESTAMP()"),
            change(DdlKind.DROP_COLUMN, "d"),
        ],
        catalog(("c", c), ("d", None)),
    )
    assert isinstance(statement, Evolution)
    assert statement.read_again == found.read_again
