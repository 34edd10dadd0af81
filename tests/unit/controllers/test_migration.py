"""Megaphone migration plans: all-at-once, fluid and batched steps; non-interfering groups."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from swivel.controllers.assignments import (
    AssignmentError,
    changed_bins,
    rebalance_for_executors,
    validate_assignment,
)
from swivel.controllers.migration import (
    MigrationError,
    MigrationPlan,
    Move,
    Step,
    Strategy,
    non_interfering_steps,
    plan_migration,
)

NAMES = [f"exec-{i}" for i in range(6)]


def contiguous(bins: int, executors: list[str]) -> dict[int, str]:
    share = bins // len(executors)
    return {b: executors[b // share] for b in range(bins)}


def max_degree(moves: list[Move]) -> int:
    sends = Counter(m.source for m in moves)
    receives = Counter(m.target for m in moves)
    return max([*sends.values(), *receives.values()], default=0)


def max_load(step: Step) -> int:
    """Most bins one executor sends or receives in a step."""
    return max_degree(list(step.moves)) if step.moves else 0


def assert_non_interfering(step: Step) -> None:
    sources = [m.source for m in step.moves]
    targets = [m.target for m in step.moves]
    assert len(sources) == len(set(sources)), f"an executor sends twice in {step}"
    assert len(targets) == len(set(targets)), f"an executor receives twice in {step}"


# -- Megaphone §5: "move half the bins of one executor to the other" ------------------------


def half_of_one_executor() -> tuple[dict[int, str], dict[int, str]]:
    """16 bins on two executors, 8 each; then exec-0 hands half of its bins (4..7) over."""
    current = contiguous(16, ["exec-0", "exec-1"])
    target = {b: "exec-1" if 4 <= b < 8 else e for b, e in current.items()}
    return current, target


@pytest.mark.parametrize(
    ("strategy", "steps", "max_per_step"),
    [(Strategy.ALL_AT_ONCE, 1, 4), (Strategy.FLUID, 4, 1), (Strategy.BATCHED, 2, 2)],
)
def test_megaphone_half_of_one_executor(strategy, steps, max_per_step) -> None:
    current, target = half_of_one_executor()
    plan = plan_migration(current, target, strategy, batch_size=2)
    assert plan.step_count == steps
    assert plan.max_moves_per_step == max_per_step
    assert plan.moved_bins == (4, 5, 6, 7)
    assert plan.after == target


def test_gaps_separate_move_steps_but_do_not_trail() -> None:
    current, target = half_of_one_executor()
    plan = plan_migration(current, target, Strategy.FLUID, gap_batches=2)
    assert [step.is_gap for step in plan.steps] == [False, True, True] * 3 + [False]
    assert plan.step_count == 10 and plan.move_step_count == 4
    single = plan_migration(current, target, Strategy.ALL_AT_ONCE, gap_batches=2)
    assert single.step_count == 1


def test_megaphone_evaluation_half_the_workers_and_back() -> None:
    """§5: "half of the keys on half of the workers to the other half", then back to
    balance. Four workers with 4 bins each; w0 and w1 give half their bins to w2 and w3."""
    workers = ["w0", "w1", "w2", "w3"]
    balanced = contiguous(16, workers)
    skewed = dict(balanced)
    skewed.update({2: "w2", 3: "w2", 6: "w3", 7: "w3"})
    there = plan_migration(balanced, skewed, Strategy.BATCHED, batch_size=2)
    assert there.step_count == 2  # each step one whole non-interfering group
    assert all(len(step.moves) == 2 for step in there.steps)
    back_target = rebalance_for_executors(skewed, workers)
    back = plan_migration(skewed, back_target, Strategy.BATCHED, batch_size=2)
    assert back.step_count == 2 and len(back.moves) == 4
    for step in [*there.steps, *back.steps]:
        assert_non_interfering(step)


# -- batched grouping ------------------------------------------------------------------------


def test_small_batches_use_the_fewest_steps_not_a_chunk_per_matching() -> None:
    # Three senders each send two bins, to a ring of receivers: Δ = 2, six moves. With
    # batch_size 2 the bound is max(2, ceil(6 / 2)) = 3 steps; chunking two matchings of
    # three into pairs would take four.
    moves = [
        Move(0, "s0", "r0"),
        Move(1, "s0", "r1"),
        Move(2, "s1", "r1"),
        Move(3, "s1", "r2"),
        Move(4, "s2", "r2"),
        Move(5, "s2", "r0"),
    ]
    steps = non_interfering_steps(moves, batch_size=2)
    assert [len(group) for group in steps] == [2, 2, 2]
    assert [len(group) for group in non_interfering_steps(moves)] == [3, 3]


def test_non_interfering_steps_rejects_empty_batches() -> None:
    with pytest.raises(MigrationError) as caught:
        non_interfering_steps([Move(0, "a", "b")], batch_size=0)
    assert caught.value.field == "batch_size"


def test_disjoint_moves_are_chunked_by_batch_size() -> None:
    current = {b: f"exec-{b}" for b in range(8)}
    target = {b: f"exec-{(b + 1) % 8}" if b % 2 == 0 else e for b, e in current.items()}
    plan = plan_migration(current, target, Strategy.BATCHED, batch_size=3)
    # Four disjoint moves (Δ = 1) in ceil(4 / 3) = 2 steps, evened out to 2 + 2.
    assert [len(step.moves) for step in plan.steps] == [2, 2]


def test_nothing_to_move_gives_an_empty_plan() -> None:
    current = contiguous(8, ["exec-0", "exec-1"])
    for strategy in Strategy:
        plan = plan_migration(current, current, strategy, gap_batches=3)
        assert plan.steps == () and plan.after == current and plan.max_moves_per_step == 0


def test_plan_is_deterministic_whatever_the_dict_order() -> None:
    current = contiguous(32, ["exec-0", "exec-1", "exec-2", "exec-3"])
    target = rebalance_for_executors(current, ["exec-0", "exec-4", "exec-5"])
    shuffled_current = dict(reversed(list(current.items())))
    shuffled_target = dict(sorted(target.items(), key=lambda kv: -kv[0]))
    one = plan_migration(current, target, Strategy.BATCHED, batch_size=3)
    two = plan_migration(shuffled_current, shuffled_target, "batched", batch_size=3)
    assert one == two


def test_assignment_after_each_step_and_out_of_range() -> None:
    current, target = half_of_one_executor()
    plan = plan_migration(current, target, Strategy.FLUID)
    assert plan.assignment_after(0) == {**current, 4: "exec-1"}
    assert plan.assignment_after(3) == target
    assert list(plan.assignments())[-1] == target
    with pytest.raises(IndexError):
        plan.assignment_after(4)


def test_to_dict_is_json_friendly() -> None:
    current, target = half_of_one_executor()
    data = plan_migration(current, target, Strategy.BATCHED, batch_size=2, gap_batches=1).to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["strategy"] == "batched" and data["movedBins"] == [4, 5, 6, 7]
    assert data["steps"][0] == {"handOver": [{"from": "exec-0", "to": "exec-1", "bins": [4, 5]}]}
    assert data["steps"][1] == {"gap": True}
    assert data["initial"] == [current[b] for b in range(16)]
    assert MigrationPlan.from_dict(data) == plan_migration(
        current, target, Strategy.BATCHED, batch_size=2, gap_batches=1
    )


@pytest.mark.parametrize(
    ("kwargs", "error", "field"),
    [
        ({"strategy": "teleport"}, MigrationError, "strategy"),
        ({"batch_size": 0}, MigrationError, "batch_size"),
        ({"gap_batches": -1}, MigrationError, "gap_batches"),
        ({"target": {0: "a"}}, AssignmentError, "target"),
        ({"current": {0: "a", 2: "a"}}, AssignmentError, "current"),
    ],
)
def test_bad_parameters_name_their_field(kwargs, error, field) -> None:
    arguments = {"current": {0: "a", 1: "b"}, "target": {0: "b", 1: "b"}, "strategy": "fluid"}
    arguments.update(kwargs)
    strategy = arguments.pop("strategy")
    with pytest.raises(error) as caught:
        plan_migration(arguments.pop("current"), arguments.pop("target"), strategy, **arguments)
    assert caught.value.field == field


# -- properties ----------------------------------------------------------------------------


@st.composite
def migrations(draw: st.DrawFn) -> tuple[dict[int, str], dict[int, str]]:
    bins = draw(st.integers(min_value=1, max_value=64))
    before = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=True))
    after = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=True))
    current = {b: draw(st.sampled_from(before)) for b in range(bins)}
    if draw(st.booleans()):
        return current, rebalance_for_executors(current, after)
    return current, {b: draw(st.sampled_from(after)) for b in range(bins)}


def replay(plan: MigrationPlan, current: dict[int, str]) -> None:
    """Apply the steps one by one, checking every move starts where its bin is."""
    placement = dict(current)
    for step in plan.steps:
        for move in step.moves:
            assert placement[move.bin] == move.source
            placement[move.bin] = move.target
        validate_assignment(placement, bins=len(current))


@given(
    migrations(),
    st.sampled_from(list(Strategy)),
    st.integers(min_value=1, max_value=8),
    st.integers(min_value=0, max_value=2),
)
def test_plans_conserve_bins(migration, strategy, batch_size, gap_batches) -> None:
    current, target = migration
    plan = plan_migration(current, target, strategy, batch_size=batch_size, gap_batches=gap_batches)
    replay(plan, current)
    assert plan.after == target
    assert plan.moved_bins == changed_bins(current, target)  # each changed bin exactly once
    for placement in plan.assignments():
        validate_assignment(placement, bins=len(current))
    moves = plan.move_step_count
    assert plan.step_count == moves + gap_batches * max(moves - 1, 0)


@given(migrations(), st.integers(min_value=1, max_value=8))
def test_batched_steps_are_fewest_and_spread(migration, batch_size) -> None:
    current, target = migration
    plan = plan_migration(current, target, Strategy.BATCHED, batch_size=batch_size)
    moves = list(plan.moves)
    # The fewest steps the batch size allows, each its moves' Megaphone groups.
    count = len(moves)
    assert plan.step_count == math.ceil(count / batch_size)
    if not moves:
        return
    groups = non_interfering_steps(moves, math.ceil(count / max_degree(moves)))
    smallest_group = min(len(group) for group in groups)
    for step in plan.steps:
        assert 1 <= len(step.moves) <= batch_size
        # A step spans at most ceil(len / smallest group) + 1 groups, and an executor
        # appears at most once per group.
        bound = min(len(step.moves), math.ceil(len(step.moves) / smallest_group) + 1)
        assert max_load(step) <= bound


@given(migrations())
def test_non_interfering_groups_are_max_degree_many(migration) -> None:
    current, target = migration
    moves = list(plan_migration(current, target, Strategy.ALL_AT_ONCE).moves)
    groups = non_interfering_steps(moves)
    assert len(groups) == (max_degree(moves) if moves else 0)  # König
    for group in groups:
        assert_non_interfering(Step(tuple(group)))


@given(migrations())
def test_fluid_and_all_at_once_shapes(migration) -> None:
    current, target = migration
    moved = len(changed_bins(current, target))
    fluid = plan_migration(current, target, Strategy.FLUID)
    assert fluid.step_count == moved and fluid.max_moves_per_step == min(moved, 1)
    at_once = plan_migration(current, target, Strategy.ALL_AT_ONCE)
    assert at_once.step_count == min(moved, 1) and at_once.max_moves_per_step == moved
