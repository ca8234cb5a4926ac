"""``stream.slice_rows``: the rows slice tasks hand the driver, back into one batch."""

from __future__ import annotations

from airflow_cdc.model import BinlogPosition, TableId
from airflow_cdc.stream.slice_rows import (
    ASIDE,
    BLOCK,
    BOUNDARY,
    Aside,
    Block,
    aside_payload,
    block_payload,
    boundary_payload,
    slice_batch,
)

A, B = TableId("db", "a"), TableId("db", "b")


def pos(offset: int) -> BinlogPosition:
    return BinlogPosition("b.000001", offset)


def test_a_table_set_aside_keeps_the_first_reason_in_binlog_order() -> None:
    """Slices come back in any order; the earliest schema change of a table is the one the
    driver names, and the blocks of every table are kept as they came."""
    rows = [
        (ASIDE, str(A), aside_payload(Aside(pos(900), "columns no longer there ['v']"))),
        (BLOCK, str(A), block_payload(Block(3, path="a-1.arrow"))),
        (BLOCK, str(B), block_payload(Block(2, data=b"rows"))),
        (BOUNDARY, pos(1000).to_text(), boundary_payload(pos(500), 1.0, [str(A), str(B)])),
        (ASIDE, str(A), aside_payload(Aside(pos(400), "TRUNCATE TABLE a"))),
        (BOUNDARY, pos(500).to_text(), boundary_payload(pos(100), 1.0, [str(A), str(B)])),
    ]
    batch = slice_batch(rows)
    assert batch.aside == {A: Aside(pos(400), "TRUNCATE TABLE a")}
    assert batch.blocks == {A: [Block(3, path="a-1.arrow")], B: [Block(2, data=b"rows")]}
    assert (batch.start, batch.end, batch.slices) == (pos(100), pos(1000), 2)


def test_offsets_keep_their_epoch_and_the_form_before_epochs() -> None:
    from airflow_cdc.stream.slice_rows import Offset

    before = {"file": "b.000003", "pos": 120, "seen_at": 1.5}
    assert Offset.from_map(before).to_map() == before  # checkpoints written before epochs
    moved = Offset(BinlogPosition("r.000001", 4, 0, epoch=2), 2.0)
    assert moved.to_map()["epoch"] == 2
    assert Offset.from_map(moved.to_map()) == moved


def test_halves_of_a_table_without_a_key_are_kept_apart_from_reduced_rows() -> None:
    """A keyless table's blocks of halves (``stream.slice_halves``) carry the positions of
    their first and last half, and are not merged as reduced rows."""
    from airflow_cdc.stream.slice_rows import HALVES

    first, second = (
        Block(4, data=b"h1", low=10, high=20),
        Block(2, path="h2.arrow", low=30, high=31),
    )
    rows = [
        (HALVES, str(A), block_payload(second)),
        (BLOCK, str(B), block_payload(Block(2, data=b"rows"))),
        (HALVES, str(A), block_payload(first)),
        (BOUNDARY, pos(500).to_text(), boundary_payload(pos(100), 1.0, [str(A), str(B)])),
    ]
    batch = slice_batch(rows)
    assert batch.halves == {A: [second, first]}
    assert batch.blocks == {B: [Block(2, data=b"rows")]}


def test_the_digest_of_each_tables_marks_comes_back_and_a_disagreement_is_unknown() -> None:
    """The slices return the digest of each table's marks they filtered with
    (``stream.stale_marks``); slices of a batch that disagree leave it unknown (``""``), so
    the driver filters that table's rows again."""
    rows = [
        (BOUNDARY, pos(500).to_text(), boundary_payload(pos(100), 1.0, [], marks={str(A): "x"})),
        (
            BOUNDARY,
            pos(900).to_text(),
            boundary_payload(pos(500), 1.0, [], marks={str(A): "y", str(B): "z"}),
        ),
        (BOUNDARY, pos(990).to_text(), boundary_payload(pos(900), 1.0, [], marks={str(B): "z"})),
    ]
    assert slice_batch(rows).marks == {A: "", B: "z"}
