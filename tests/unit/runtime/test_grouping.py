"""The driver's coordination points (swivel.jobs.runtime.grouping): every g batches, every
batch while reconfiguration work is pending, and AIMD stepped only on grouped periods."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from swivel.controllers.aimd import GroupConfig, GroupState
from swivel.jobs.runtime.grouping import CoordinationGroups


def points(groups: CoordinationGroups, batches: range) -> list[int]:
    return [b for b in batches if groups.is_point(b)]


def test_a_fixed_group_coordinates_every_g_batches_from_the_first() -> None:
    groups = CoordinationGroups(fixed=3)
    assert points(groups, range(10)) == [0, 3, 6, 9]


def test_pending_work_makes_every_batch_a_point_then_grouping_resumes() -> None:
    pending = {"now": False}
    groups = CoordinationGroups(fixed=4)
    groups.when_pending(lambda: pending["now"])
    assert points(groups, range(5)) == [0, 4]
    pending["now"] = True
    assert points(groups, range(5, 9)) == [5, 6, 7, 8]
    pending["now"] = False
    assert points(groups, range(9, 18)) == [9, 13, 17]


def test_a_source_that_fails_counts_as_pending() -> None:
    groups = CoordinationGroups(fixed=8)
    groups.when_pending(lambda: 1 / 0 > 0)
    assert points(groups, range(4)) == [0, 1, 2, 3]


def test_a_batch_is_decided_once_whichever_listener_asks_first() -> None:
    pending = {"now": False}
    groups = CoordinationGroups(fixed=4)
    groups.when_pending(lambda: pending["now"])
    assert groups.is_point(0)
    assert not groups.is_point(1)
    pending["now"] = True  # a migration queued between the two listeners' questions
    assert not groups.is_point(1)  # the same answer for batch 1 ...
    assert groups.is_point(2)  # ... and the next batch is a point


def test_a_restart_makes_the_first_batch_a_point() -> None:
    groups = CoordinationGroups(fixed=5)
    assert points(groups, range(3)) == [0]
    groups.restart()
    assert groups.is_point(2)  # the replayed batch


def test_aimd_doubles_g_when_coordination_costs_more_than_the_band() -> None:
    groups = CoordinationGroups(GroupConfig(lower_overhead=0.01, upper_overhead=0.02))
    assert groups.is_point(0)
    for batch in range(1, 40):
        groups.batch_ended(0.2)
        groups.spent(0.01)  # 5 % of a batch, whatever g: above the band
        groups.is_point(batch)
    assert groups.group == 16  # doubled up to the maximum
    assert list(groups.points)[:5] == [0, 1, 3, 7, 15]


def test_aimd_is_not_stepped_on_periods_with_pending_work() -> None:
    pending = {"now": True}
    groups = CoordinationGroups()
    groups.when_pending(lambda: pending["now"])
    for batch in range(20):
        groups.batch_ended(0.2)
        groups.spent(0.05)  # forced per-batch coordination is no measurement of g
        assert groups.is_point(batch)
    assert groups.state == GroupState(1, None)


def test_totals_count_batches_points_and_time() -> None:
    groups = CoordinationGroups(fixed=2)
    for batch in range(4):
        groups.batch_ended(0.1)
        groups.spent(0.002)
        groups.is_point(batch)
    totals = groups.totals
    assert (totals.batches, totals.points) == (4, 2)
    assert round(totals.coordination_ms_per_batch, 6) == 2.0


@given(st.integers(1, 16), st.lists(st.booleans(), min_size=1, max_size=80))
def test_never_more_than_g_batches_between_points_and_every_pending_batch_is_one(
    g: int, pending_at: list[bool]
) -> None:
    state = {"pending": False}
    groups = CoordinationGroups(fixed=g)
    groups.when_pending(lambda: state["pending"])
    last = None
    for batch, pending in enumerate(pending_at):
        state["pending"] = pending
        point = groups.is_point(batch)
        if pending:
            assert point
        if last is not None:
            assert batch - last <= g
        if point:
            last = batch
