"""A migration's steps read off G': several givers in parallel within a step, least-loaded
taker first, bounded by the strategy's batch size; no wave order (in Spark no bin is handed
on within a plan), so a swap alternates its directions and stays balanced."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from swivel.controllers.assignments import rebalance_for_executors
from swivel.controllers.handover import HandOver
from swivel.controllers.metatopology import plan_meta_topology
from swivel.controllers.migration import MigrationPlan, Strategy, plan_migration

NAMES = ["A", "B", "C", "D", "E"]


def hand_overs(plan: MigrationPlan) -> list[list[tuple[str, str, tuple[int, ...]]]]:
    return [[(h.giver, h.taker, h.bins) for h in step.hand_overs] for step in plan.steps]


def test_chi_scale_out_two_givers_hand_to_the_new_reducer_in_parallel() -> None:
    """Chi Fig. 2: R1 [a-l] and R2 [m-z] hand [i-l] and [m-p] to the new R3. Both givers
    share every step; the batch size bounds the bins per step."""
    letters = {b: "R1" if b < 12 else "R2" for b in range(26)}
    after = {**letters, **{b: "R3" for b in range(8, 16)}}
    plan = plan_migration(letters, after, Strategy.BATCHED, batch_size=4)
    assert [sum(len(b) for _, _, b in step) for step in hand_overs(plan)] == [4, 4]
    for step in hand_overs(plan):
        assert {giver for giver, _, _ in step} == {"R1", "R2"}  # two givers, one step
        assert {taker for _, taker, _ in step} == {"R3"}


def test_a_chain_shares_a_step() -> None:
    """A -> B -> C with B collapsed in G': Chi's Theorem 1 would make B hand its bin on only
    after taking A's. In Spark each bin moves once, from the checkpoint, so both moves fit
    one batch, least-loaded taker (C holds 1 bin, B 2) first; fluid takes one bin per step."""
    before = {0: "A", 1: "A", 2: "B", 3: "B", 4: "C"}
    after = {0: "B", 1: "A", 2: "C", 3: "B", 4: "C"}
    batched = plan_migration(before, after, Strategy.BATCHED, batch_size=8)
    assert hand_overs(batched) == [[("B", "C", (2,)), ("A", "B", (0,))]]
    fluid = plan_migration(before, after, Strategy.FLUID)
    assert hand_overs(fluid) == [[("B", "C", (2,))], [("A", "B", (0,))]]


def test_a_swap_alternates_its_directions() -> None:
    """A gives 8 bins to B and B 8 to A (Megaphone's benchmark swap). Every batched step
    moves one bin each way and fluid alternates, so no executor ever holds more than one
    bin over its share: the migration creates no imbalance of its own."""
    before = {b: "A" if b < 16 else "B" for b in range(32)}
    after = {b: ("B" if b < 8 else "A") if b < 16 else ("A" if b < 24 else "B") for b in range(32)}
    assert plan_meta_topology(before, after).split_executors  # G' splits one of them
    batched = plan_migration(before, after, Strategy.BATCHED, batch_size=2)
    assert len(batched.steps) == 8
    for step in hand_overs(batched):
        assert sorted((giver, taker) for giver, taker, _ in step) == [("A", "B"), ("B", "A")]
    fluid = plan_migration(before, after, Strategy.FLUID)
    for placement in fluid.assignments():
        held = [list(placement.values()).count(e) for e in ("A", "B")]
        assert max(held) - min(held) <= 2


def test_the_least_loaded_taker_goes_first() -> None:
    """D holds nothing, C holds two bins: fluid hands D a bin first, then alternates as the
    loads even out; the giver holding most gives first."""
    before = {0: "A", 1: "A", 2: "A", 3: "A", 4: "B", 5: "B", 6: "C", 7: "C"}
    after = {**before, 0: "D", 1: "D", 2: "C", 4: "D"}
    plan = plan_migration(before, after, Strategy.FLUID)
    order = [(h.giver, h.taker, h.bins) for step in plan.steps for h in step.hand_overs]
    # D (0 bins) takes first, from A (4) before B (2); then D (1) < C (2) again; then C
    # and D tie at 2 and A and B at 2: by name.
    assert order == [("A", "D", (0,)), ("A", "D", (1,)), ("A", "C", (2,)), ("B", "D", (4,))]


def test_step_hand_overs_group_the_moves_in_order() -> None:
    plan = plan_migration({0: "A", 1: "A", 2: "B"}, {0: "C", 1: "C", 2: "C"}, "all-at-once")
    (step,) = plan.steps
    assert step.hand_overs == (HandOver("A", "C", (0, 1)), HandOver("B", "C", (2,)))


@st.composite
def migrations(draw: st.DrawFn) -> tuple[dict[int, str], dict[int, str]]:
    bins = draw(st.integers(min_value=1, max_value=40))
    before = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True))
    after = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True))
    current = {b: draw(st.sampled_from(before)) for b in range(bins)}
    if draw(st.booleans()):
        return current, rebalance_for_executors(current, after)
    return current, {b: draw(st.sampled_from(after)) for b in range(bins)}


@given(migrations())
def test_fluid_always_hands_to_the_least_loaded_remaining_taker(
    migration: tuple[dict[int, str], dict[int, str]],
) -> None:
    """The order property itself (conservation and step sizes are test_migration's): at
    every fluid step, no taker still waiting for a bin holds fewer bins than this one's."""
    current, target = migration
    plan = plan_migration(current, target, Strategy.FLUID)
    placement = dict(current)
    remaining = [move for step in plan.steps for move in step.moves]
    while remaining:
        move = remaining.pop(0)
        held = Counter(placement.values())
        assert all(held[move.target] <= held[other.target] for other in remaining)
        placement[move.bin] = move.target
