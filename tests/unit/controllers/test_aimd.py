"""Drizzle's AIMD controller on Swivel's coordination interval."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from swivel.controllers.aimd import (
    AimdConfig,
    AimdState,
    overhead,
    step,
)

CONFIG = AimdConfig(
    lower_overhead=0.05,
    upper_overhead=0.10,
    increase_factor=2.0,
    decrease_step=0.5,
    min_interval_s=0.5,
    max_interval_s=60.0,
    smoothing=0.3,
)


def test_overhead_is_the_coordinating_fraction_of_elapsed_time() -> None:
    assert overhead(1.0, 9.0) == pytest.approx(0.1)
    assert overhead(0.0, 0.0) == 0.0
    with pytest.raises(ValueError):
        overhead(-1.0, 1.0)


def test_above_the_band_the_interval_grows_multiplicatively() -> None:
    after = step(AimdState(4.0, 0.2), 0.2, CONFIG)
    assert after.interval_s == 8.0
    assert after.smoothed_overhead == pytest.approx(0.2)


def test_below_the_band_the_interval_shrinks_additively() -> None:
    assert step(AimdState(4.0, 0.01), 0.01, CONFIG).interval_s == 3.5


def test_inside_the_band_the_interval_holds() -> None:
    assert step(AimdState(4.0, 0.07), 0.07, CONFIG).interval_s == 4.0


def test_the_interval_is_clamped_to_its_bounds() -> None:
    assert step(AimdState(40.0, 0.5), 0.5, CONFIG).interval_s == 60.0
    assert step(AimdState(0.6, 0.0), 0.0, CONFIG).interval_s == 0.5


def test_first_measurement_seeds_the_average_and_later_ones_are_smoothed() -> None:
    first = step(AimdState.start(CONFIG), 0.2, CONFIG)
    assert first.smoothed_overhead == 0.2
    second = step(first, 0.0, CONFIG)
    assert second.smoothed_overhead == pytest.approx(0.3 * 0.0 + 0.7 * 0.2)


def test_a_single_spike_does_not_grow_the_interval() -> None:
    """Drizzle smooths so a GC pause at one boundary is not mistaken for real overhead."""
    settled = AimdState(4.0, 0.07)
    assert step(settled, 0.15, CONFIG).interval_s == 4.0  # smoothed: 0.094


def test_start_is_at_the_minimum_unless_told_otherwise() -> None:
    assert AimdState.start(CONFIG) == AimdState(0.5, None)
    assert AimdState.start(CONFIG, 1000.0).interval_s == 60.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"lower_overhead": 0.2, "upper_overhead": 0.1},
        {"increase_factor": 1.0},
        {"decrease_step": 0.0},
        {"min_interval_s": 10.0, "max_interval_s": 5.0},
        {"smoothing": 0.0},
    ],
)
def test_invalid_configs_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        AimdConfig(**kwargs)


fractions = st.floats(0.0, 1.0)
states = st.builds(
    AimdState,
    st.floats(CONFIG.min_interval_s, CONFIG.max_interval_s),
    st.none() | fractions,
)


@given(states, st.lists(fractions, max_size=50))
def test_interval_stays_within_bounds(start: AimdState, measurements: list[float]) -> None:
    state = start
    for measured in measurements:
        state = step(state, measured, CONFIG)
        assert CONFIG.min_interval_s <= state.interval_s <= CONFIG.max_interval_s


@given(states, fractions, fractions)
def test_more_overhead_never_means_a_shorter_interval(
    state: AimdState, low: float, high: float
) -> None:
    low, high = sorted((low, high))
    assert step(state, low, CONFIG).interval_s <= step(state, high, CONFIG).interval_s


@given(
    fixed_cost_s=st.floats(0.05, 3.0),
    start_s=st.floats(CONFIG.min_interval_s, CONFIG.max_interval_s),
)
def test_converges_into_the_band_when_overhead_is_a_fixed_cost_per_coordination(
    fixed_cost_s: float, start_s: float
) -> None:
    """Synthetic model: each coordination costs `fixed_cost_s`, so overhead = cost /
    interval. The band [5 %, 10 %] then means an interval in [10, 20] x cost, which the
    chosen costs keep inside [min, max] and at least one decrease step wide."""
    state = AimdState.start(CONFIG, start_s)
    history = []
    for _ in range(200):
        state = step(state, min(1.0, fixed_cost_s / state.interval_s), CONFIG)
        history.append(state.interval_s)
    settled = fixed_cost_s / state.interval_s
    edge = 1e-9  # a cost of exactly 0.05 s at the 0.5 s minimum sits on the band's edge
    assert CONFIG.lower_overhead - edge <= settled <= CONFIG.upper_overhead + edge
    assert len(set(history[-10:])) == 1  # and stays there


@given(st.floats(0.0, 0.04), st.floats(0.5, 60.0))
def test_cheap_coordination_drives_the_interval_to_its_minimum(
    measured: float, start_s: float
) -> None:
    state = AimdState.start(CONFIG, start_s)
    for _ in range(200):
        state = step(state, measured, CONFIG)
    assert state.interval_s == CONFIG.min_interval_s
