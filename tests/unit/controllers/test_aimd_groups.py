"""Drizzle's AIMD on g, the batches per coordination point of Swivel's driver, and the rule
that pending reconfiguration work forces a coordination point at every batch."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from swivel.controllers.aimd import GroupConfig, GroupState, group_in_force, step_group

CONFIG = GroupConfig(lower_overhead=0.01, upper_overhead=0.02, max_group=16, smoothing=0.3)


def test_above_the_band_the_group_doubles() -> None:
    assert step_group(GroupState(4, 0.05), 0.05, CONFIG) == GroupState(8, pytest.approx(0.05))


def test_below_the_band_the_group_shrinks_by_one_batch() -> None:
    assert step_group(GroupState(4, 0.001), 0.001, CONFIG).group == 3


def test_inside_the_band_the_group_holds() -> None:
    assert step_group(GroupState(4, 0.015), 0.015, CONFIG).group == 4


def test_the_group_stays_between_one_and_the_maximum() -> None:
    assert step_group(GroupState(16, 0.5), 0.5, CONFIG).group == 16
    assert step_group(GroupState(1, 0.0), 0.0, CONFIG).group == 1


def test_a_single_spike_does_not_double_the_group() -> None:
    assert step_group(GroupState(4, 0.015), 0.03, CONFIG).group == 4  # smoothed: 0.0195


def test_pending_work_forces_a_coordination_point_at_every_batch() -> None:
    state = GroupState(8, 0.05)
    assert group_in_force(state, pending=True) == 1
    assert group_in_force(state, pending=False) == 8


@pytest.mark.parametrize(
    "kwargs",
    [
        {"lower_overhead": 0.2, "upper_overhead": 0.1},
        {"increase_factor": 1},
        {"decrease_step": 0},
        {"max_group": 0},
        {"smoothing": 0.0},
    ],
)
def test_invalid_configs_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        GroupConfig(**kwargs)  # type: ignore[arg-type]


fractions = st.floats(0.0, 1.0)
groups = st.builds(GroupState, st.integers(1, CONFIG.max_group), st.none() | fractions)


@given(groups, st.lists(fractions, max_size=50))
def test_the_group_is_always_a_whole_number_of_batches_within_bounds(
    start: GroupState, measurements: list[float]
) -> None:
    state = start
    for measured in measurements:
        state = step_group(state, measured, CONFIG)
        assert isinstance(state.group, int)
        assert 1 <= state.group <= CONFIG.max_group


@given(groups, fractions, fractions)
def test_more_overhead_never_means_a_smaller_group(
    state: GroupState, low: float, high: float
) -> None:
    low, high = sorted((low, high))
    assert step_group(state, low, CONFIG).group <= step_group(state, high, CONFIG).group


@given(groups, st.lists(fractions, max_size=20))
def test_pending_work_means_g_one_whatever_aimd_chose(
    start: GroupState, measurements: list[float]
) -> None:
    state = start
    for measured in measurements:
        state = step_group(state, measured, CONFIG)
        assert group_in_force(state, pending=True) == 1


@given(
    per_point=st.floats(4.0, 12.0),
    floor=st.floats(0.0, 0.5),
    start=st.integers(1, 16),
)
def test_converges_into_the_band_when_a_point_costs_a_fixed_time(
    per_point: float, floor: float, start: int
) -> None:
    """Synthetic driver, in % of a batch's time: every batch costs `floor` of coordination
    that cannot be grouped and every coordination point `per_point`, so the overhead over a
    group of g batches is (floor + point / g) / (floor + point / g + 100). g = 1 is then
    above the band [1 %, 2 %] and the band holds at least two group sizes within 1..16; g
    settles in it, as Drizzle's group size does (§5.5.3, Fig. 11), and stays."""

    def measured(g: int) -> float:
        spent = floor + per_point / g
        return spent / (spent + 100.0)

    band = range(1, CONFIG.max_group + 1)
    assume(sum(CONFIG.lower_overhead <= measured(g) <= CONFIG.upper_overhead for g in band) >= 2)
    state = GroupState(start)
    history = []
    for _ in range(300):
        state = step_group(state, measured(state.group), CONFIG)
        history.append(state.group)
    assert CONFIG.lower_overhead <= measured(state.group) <= CONFIG.upper_overhead
    assert len(set(history[-10:])) == 1
