"""The low-watermark rule (``source.watermark.opening_steps``) on a model server.

The model: other sessions' transactions are written to the binlog (each takes the next
position), then commit in the engine, in binlog order (ordered commit). Any interleaving of
those with the chunk session's steps is possible. The rule holds when every transaction the
read view cannot see lies after the low watermark, so the correction window replays it.
Without the heartbeat, MySQL's plain position read is not enough (the race the module
docstring describes): the model finds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import find, given
from hypothesis import strategies as st

from airflow_cdc.source.watermark import Step, opening_steps

#: What other sessions do between the chunk session's steps.
WRITE, COMMIT = "write", "commit"
schedules = st.lists(st.lists(st.sampled_from([WRITE, COMMIT]), max_size=6), min_size=4)


@dataclass
class ModelServer:
    written: int = 0  # transactions in the binlog: positions 1..written
    committed: int = 0  # committed in the engine: 1..committed (ordered commit)
    low: int | None = None
    view: int | None = None  # transactions the view sees: 1..view
    log: list[str] = field(default_factory=list)

    def other(self, action: str) -> None:
        if action == WRITE:
            self.written += 1
        elif self.committed < self.written:
            self.committed += 1

    def step(self, step: Step) -> None:
        if step is Step.OPEN_VIEW_AT_ITS_POSITION:  # MariaDB: the position matches the view
            self.view = self.low = self.committed
        elif step is Step.READ_POSITION:
            self.low = self.written
        elif step is Step.HEARTBEAT:
            self.written += 1  # its own transaction, committed in order before it returns
            self.committed = self.written
        elif step is Step.OPEN_VIEW:
            self.view = self.committed


def run(steps: tuple[Step, ...], schedule: list[list[str]]) -> ModelServer:
    """Other sessions act before, between and after the steps, as ``schedule`` says."""
    server = ModelServer()
    for i, step in enumerate(steps):
        for action in schedule[i % len(schedule)]:
            server.other(action)
        server.step(step)
    for action in schedule[-1]:
        server.other(action)
    return server


def unseen_before_low(server: ModelServer) -> list[int]:
    """Transactions the view cannot see that lie at or before the watermark: the window
    starting at the watermark would miss them."""
    assert server.low is not None
    assert server.view is not None
    return [t for t in range(server.view + 1, server.written + 1) if t <= server.low]


@given(st.booleans(), schedules)
def test_no_change_the_view_cannot_see_lies_before_the_low_watermark(
    is_mariadb: bool, schedule: list[list[str]]
) -> None:
    assert unseen_before_low(run(opening_steps(is_mariadb), schedule)) == []


def test_without_the_heartbeat_the_position_read_races_the_engine_commit() -> None:
    steps = (Step.READ_POSITION, Step.OPEN_VIEW)
    found = find(schedules, lambda schedule: bool(unseen_before_low(run(steps, schedule))))
    # A transaction written to the binlog before the position read, not yet committed when
    # the view opened: invisible to the read, and before the watermark.
    assert unseen_before_low(run(steps, found))


def test_the_steps_open_one_view_and_set_the_watermark() -> None:
    for is_mariadb in (True, False):
        steps = opening_steps(is_mariadb)
        assert sum(s in (Step.OPEN_VIEW, Step.OPEN_VIEW_AT_ITS_POSITION) for s in steps) == 1
        assert steps[0] in (Step.READ_POSITION, Step.OPEN_VIEW_AT_ITS_POSITION)
