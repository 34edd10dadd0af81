"""Chi's hand-over order as a migration's steps: waves read off G' (an executor passes bins
on only after taking its own), several givers in parallel within a step, least-loaded taker
first, bounded by the strategy's batch size."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from swivel.controllers.assignments import rebalance_for_executors
from swivel.controllers.handover import HandOver, waves
from swivel.controllers.metatopology import plan_meta_topology
from swivel.controllers.migration import MigrationPlan, Strategy, plan_migration

NAMES = ["A", "B", "C", "D", "E"]


def hand_overs(plan: MigrationPlan) -> list[list[tuple[str, str, tuple[int, ...]]]]:
    return [[(h.giver, h.taker, h.bins) for h in step.hand_overs] for step in plan.steps]


def test_chi_scale_out_two_givers_hand_to_the_new_reducer_in_parallel() -> None:
    """Chi Fig. 2: R1 [a-l] and R2 [m-z] hand [i-l] and [m-p] to the new R3. Both givers
    are in wave 0 and share every step; the batch size bounds the bins per step."""
    letters = {b: "R1" if b < 12 else "R2" for b in range(26)}
    after = {**letters, **{b: "R3" for b in range(8, 16)}}
    plan = plan_migration(letters, after, Strategy.BATCHED, batch_size=4)
    assert [sum(len(b) for _, _, b in step) for step in hand_overs(plan)] == [4, 4]
    for step in hand_overs(plan):
        assert {giver for giver, _, _ in step} == {"R1", "R2"}  # two givers, one step
        assert {taker for _, taker, _ in step} == {"R3"}


def test_a_chain_hands_on_only_after_taking() -> None:
    """A -> B -> C with B collapsed in G': B receives A's bin in one step and hands its own
    on to C in a later one (Chi, Theorem 1), even when the batch would hold both."""
    before = {0: "A", 1: "A", 2: "B", 3: "B", 4: "C"}
    after = {0: "B", 1: "A", 2: "C", 3: "B", 4: "C"}
    assert [[(e.source.label, e.target.label) for e in w] for w in waves(
        plan_meta_topology(before, after)
    )] == [[("A", "B")], [("B", "C")]]  # fmt: skip
    for strategy in (Strategy.BATCHED, Strategy.FLUID):
        plan = plan_migration(before, after, strategy, batch_size=8)
        assert hand_overs(plan) == [[("A", "B", (0,))], [("B", "C", (2,))]]
    at_once = plan_migration(before, after, Strategy.ALL_AT_ONCE)  # one barrier: order only
    assert hand_overs(at_once) == [[("A", "B", (0,)), ("B", "C", (2,))]]


def test_a_swap_follows_the_pruned_meta_topology() -> None:
    """A gives to B and B to A. Acyclic invariance collapses A and keeps B split (B, B*):
    in G' B's old role hands to A, and A completes (hands its bin on to B*) only after.
    Spark could switch both at one boundary; the plan follows G' and takes two."""
    before = {0: "A", 1: "A", 2: "B", 3: "B"}
    after = {0: "B", 1: "A", 2: "A", 3: "B"}
    assert plan_meta_topology(before, after).split_executors == ("B",)
    plan = plan_migration(before, after, Strategy.BATCHED, batch_size=2)
    assert hand_overs(plan) == [[("B", "A", (2,))], [("A", "B", (0,))]]


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


@given(migrations(), st.sampled_from([Strategy.BATCHED, Strategy.FLUID]), st.integers(1, 6))
def test_a_collapsed_executor_gives_only_after_it_took_everything(
    migration: tuple[dict[int, str], dict[int, str]], strategy: Strategy, batch_size: int
) -> None:
    current, target = migration
    plan = plan_migration(current, target, strategy, batch_size=batch_size)
    split = set(plan_meta_topology(current, target).split_executors)
    taken_in: dict[str, list[int]] = {}
    given_in: dict[str, list[int]] = {}
    for index, step in enumerate(plan.steps):
        assert len(step.moves) <= (1 if strategy is Strategy.FLUID else batch_size)
        for move in step.moves:
            taken_in.setdefault(move.target, []).append(index)
            given_in.setdefault(move.source, []).append(index)
    for executor in set(taken_in) & set(given_in) - split:
        assert max(taken_in[executor]) < min(given_in[executor])
