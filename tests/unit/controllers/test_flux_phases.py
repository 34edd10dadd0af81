"""Flux's rounds in time: the collection phase since the last move phase, and damping."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from swivel.controllers.flux import LoadBalancePolicy, RoundSchedule, next_collection_s

POLICY = LoadBalancePolicy(min_collection_s=2.0, initial_collection_s=8.0)


def test_collection_phase_follows_the_move_phase_and_halves_when_idle() -> None:
    rounds = [(5.0, True), (0.0, False), (0.0, False), (0.0, False), (1.0, True), (12.0, True)]
    now = 0.0
    schedule = RoundSchedule.start(POLICY, now)
    lengths = [schedule.collection_s]
    for move_phase_s, moved in rounds:
        now = schedule.round_at or now
        schedule = schedule.after_round(moved, now, now + move_phase_s, POLICY)
        lengths.append(schedule.collection_s)
    assert lengths == [8.0, 5.0, 2.5, 2.0, 2.0, 2.0, 12.0]


def test_next_collection_is_never_below_the_minimum() -> None:
    policy = LoadBalancePolicy(min_collection_s=30.0)
    assert next_collection_s(0.2, True, 100.0, policy) == 30.0
    assert next_collection_s(0.0, False, 40.0, policy) == 30.0
    assert next_collection_s(45.0, True, 30.0, policy) == 45.0


def test_a_round_is_due_only_at_its_deadline_and_never_while_moving() -> None:
    schedule = RoundSchedule.start(POLICY, 100.0)
    assert schedule.round_at == 108.0 and schedule.collecting_since == 100.0
    assert not schedule.due(107.9) and schedule.remaining_s(107.0) == pytest.approx(1.0)
    assert schedule.due(108.0)
    moving = schedule.move_started(108.0)
    assert moving.moving and moving.round_at is None
    assert not moving.due(10_000.0) and moving.remaining_s(10_000.0) is None
    # The move phase took 30 s: collect as long (the damped deadline), from its end.
    after = moving.move_ended(138.0, POLICY)
    assert after.last_move_phase_s == 30.0 and after.collection_s == 30.0
    assert after.collecting_since == 138.0 and after.round_at == 168.0
    assert not after.due(167.0) and after.due(168.0)


def test_statistics_count_only_from_the_end_of_the_last_move_phase() -> None:
    schedule = RoundSchedule.start(POLICY, 0.0).move_started(8.0).move_ended(20.0, POLICY)
    assert not schedule.covers(19.9)  # gathered (partly) while bins moved or before
    assert schedule.covers(20.0) and schedule.covers(25.0)
    # A round without moves keeps the window: the placement did not change.
    idle = schedule.without_moves(32.0, POLICY)
    assert idle.collecting_since == 20.0 and idle.round_at == 32.0 + 6.0


@given(
    st.lists(
        st.tuples(st.booleans(), st.floats(min_value=0.0, max_value=1e4)),
        min_size=1,
        max_size=30,
    ),
    st.floats(min_value=0.1, max_value=100.0),
    st.floats(min_value=1.0, max_value=10.0),
)
def test_damping_bounds_the_time_spent_moving(
    rounds: list[tuple[bool, float]], minimum: float, factor: float
) -> None:
    """Flux's promise: every move phase is followed by a collection phase at least as long
    (so at most half of the time goes to moving), never one shorter than Δmin, and a round
    that moved nothing looks again after half the previous phase (or Δmin)."""
    policy = LoadBalancePolicy(min_collection_s=minimum, initial_collection_s=minimum * factor)
    now = 0.0
    schedule = RoundSchedule.start(policy, now)
    for moved, move_phase_s in rounds:
        now = schedule.round_at or now
        before = schedule
        schedule = schedule.after_round(moved, now, now + move_phase_s, policy)
        assert schedule.collection_s >= minimum
        assert schedule.round_at is not None and not schedule.moving
        if moved:
            # (timed on the clock, so up to rounding)
            assert schedule.collection_s == pytest.approx(max(minimum, move_phase_s))
            assert schedule.collecting_since == now + move_phase_s
            assert schedule.round_at == pytest.approx(now + move_phase_s + schedule.collection_s)
        else:
            assert schedule.collection_s == max(minimum, before.collection_s / 2)
            assert schedule.collecting_since == before.collecting_since
            assert schedule.round_at == pytest.approx(now + schedule.collection_s)
