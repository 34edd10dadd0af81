"""Bin placements: validation, rescale targets (balanced, fewest moves) and user moves."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from swivel.controllers.assignments import (
    AssignmentError,
    apply_moves,
    bins_by_executor,
    bins_per_executor,
    changed_bins,
    is_balanced,
    rebalance_for_executors,
    validate_assignment,
)

NAMES = [f"exec-{i}" for i in range(6)]


def contiguous(bins: int, executors: list[str]) -> dict[int, str]:
    """Executor i holds the i-th contiguous range of bins (Spark's default looks like this)."""
    share = bins // len(executors)
    return {b: executors[min(b // share, len(executors) - 1)] for b in range(bins)}


@st.composite
def placements(draw: st.DrawFn) -> dict[int, str]:
    holders = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True))
    bins = draw(st.integers(min_value=1, max_value=48))
    return {b: draw(st.sampled_from(holders)) for b in range(bins)}


executor_lists = st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=True)


# -- validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("assignment", "kwargs", "field", "fragment"),
    [
        ({0: "a", 2: "a"}, {}, "assignment", "bins [1] are not assigned"),
        ({0: "a", 1: "a"}, {"bins": 3}, "assignment", "bins [2] are not assigned"),
        ({0: "a", 1: "a", 5: "b"}, {"bins": 2}, "assignment", "out of range"),
        ({0: "a", 1: ""}, {}, "assignment[1]", "non-empty string"),
        ({0: "a", -1: "a"}, {}, "assignment", "not a non-negative integer"),
        ({False: "a"}, {}, "assignment", "not a non-negative integer"),
        ({}, {}, "assignment", "at least one bin"),
        ({0: "a", 1: "z"}, {"executors": {"a"}}, "assignment[1]", "unknown executor 'z'"),
        ({0: "a"}, {"field": "status.bins"}, None, None),
    ],
)
def test_validate_assignment_names_the_field(assignment, kwargs, field, fragment) -> None:
    if field is None:
        validate_assignment(assignment, **kwargs)
        return
    with pytest.raises(AssignmentError) as caught:
        validate_assignment(assignment, **kwargs)
    assert caught.value.field == field
    assert fragment in str(caught.value)
    assert str(caught.value).startswith(f"{field}: ")
    assert isinstance(caught.value, ValueError)


def test_bins_by_executor_lists_empty_executors_too() -> None:
    owned = bins_by_executor({0: "b", 1: "a", 2: "b"}, ["c"])
    assert owned == {"a": (1,), "b": (0, 2), "c": ()}
    assert bins_per_executor({0: "b", 1: "a", 2: "b"}, ["c"]) == {"a": 1, "b": 2, "c": 0}


def test_changed_bins_are_the_bins_whose_executor_differs() -> None:
    assert changed_bins({0: "a", 1: "a", 2: "b"}, {0: "a", 1: "b", 2: "a"}) == (1, 2)


# -- rebalance ----------------------------------------------------------------------------


def test_scale_out_two_to_three_moves_only_what_the_newcomer_needs() -> None:
    current = contiguous(16, ["exec-0", "exec-1"])
    target = rebalance_for_executors(current, ["exec-0", "exec-1", "exec-2"])
    assert bins_per_executor(target) == {
        "exec-0": 6,
        "exec-1": 5,
        "exec-2": 5,
    }  # extra bin: first in order
    assert len(changed_bins(current, target)) == 5  # 16 - (6 + 5) kept
    assert all(target[b] == "exec-2" for b in changed_bins(current, target))


def test_drain_moves_only_the_drained_executors_bins() -> None:
    current = contiguous(16, ["exec-0", "exec-1", "exec-2", "exec-3"])
    target = rebalance_for_executors(current, ["exec-0", "exec-1", "exec-2"])
    assert set(changed_bins(current, target)) == {12, 13, 14, 15}
    assert "exec-3" not in target.values()
    assert is_balanced(target, ["exec-0", "exec-1", "exec-2"])


def test_scale_two_three_two_returns_to_balance() -> None:
    two = ["exec-0", "exec-1"]
    start = contiguous(16, two)
    out = rebalance_for_executors(start, [*two, "exec-2"])
    back = rebalance_for_executors(out, two)
    assert is_balanced(back, two)
    assert len(changed_bins(out, back)) == 5  # exactly exec-2's bins come home
    assert bins_per_executor(back) == {"exec-0": 8, "exec-1": 8}


def test_extra_bins_go_to_the_most_loaded_so_fewer_bins_move() -> None:
    # 7 bins over 2 executors: 4 + 3. exec-1 holds 5, so it keeps 4 and exec-0 gets 3.
    current = {0: "exec-0", 1: "exec-0", **{b: "exec-1" for b in range(2, 7)}}
    target = rebalance_for_executors(current, ["exec-0", "exec-1"])
    assert changed_bins(current, target) == (6,)  # surplus gives its highest bin away


def test_rebalance_is_deterministic_and_ignores_insertion_order() -> None:
    current = contiguous(32, ["exec-0", "exec-1", "exec-2"])
    shuffled = dict(reversed(list(current.items())))
    executors = ["exec-3", "exec-1", "exec-0"]
    assert rebalance_for_executors(current, executors) == rebalance_for_executors(
        shuffled, executors
    )


@pytest.mark.parametrize(
    ("executors", "field"),
    [([], "executors"), (["a", "a"], "executors"), (["a", ""], "executors[1]")],
)
def test_rebalance_rejects_bad_executor_lists(executors, field) -> None:
    with pytest.raises(AssignmentError) as caught:
        rebalance_for_executors({0: "a"}, executors)
    assert caught.value.field == field


def fewest_moves_by_brute_force(current: dict[int, str], executors: list[str]) -> int:
    """Try every choice of which executors get the extra bin: the oracle for minimality."""
    base, extra = divmod(len(current), len(executors))
    loads = {e: list(current.values()).count(e) for e in executors}
    best_kept = max(
        sum(min(loads[e], base + (e in lucky)) for e in executors)
        for lucky in itertools.combinations(executors, extra)
    )
    return len(current) - best_kept


@given(placements(), executor_lists)
def test_rebalance_is_balanced_and_moves_the_fewest_bins(current, executors) -> None:
    target = rebalance_for_executors(current, executors)
    validate_assignment(target, bins=len(current), executors=set(executors))
    assert is_balanced(target, executors)
    assert len(changed_bins(current, target)) == fewest_moves_by_brute_force(current, executors)


@given(placements(), executor_lists)
def test_rebalance_never_makes_an_executor_both_give_and_receive(current, executors) -> None:
    target = rebalance_for_executors(current, executors)
    moved = changed_bins(current, target)
    givers = {current[b] for b in moved}
    receivers = {target[b] for b in moved}
    assert not givers & receivers


@given(placements(), executor_lists)
def test_rebalancing_a_balanced_placement_moves_nothing(current, executors) -> None:
    balanced = rebalance_for_executors(current, executors)
    assert rebalance_for_executors(balanced, executors) == balanced


# -- explicit moves -----------------------------------------------------------------------


def test_apply_moves_moves_the_named_bins() -> None:
    current = contiguous(8, ["exec-0", "exec-1"])
    target = apply_moves(current, [([3, 5], "exec-2"), ([0], "exec-1")])
    assert changed_bins(current, target) == (0, 3, 5)
    assert (target[0], target[3], target[5]) == ("exec-1", "exec-2", "exec-2")
    assert current == contiguous(8, ["exec-0", "exec-1"])  # input untouched


def test_moving_a_bin_where_it_already_is_changes_nothing() -> None:
    current = contiguous(4, ["exec-0", "exec-1"])
    assert apply_moves(current, [([0, 1], "exec-0")]) == current


@pytest.mark.parametrize(
    ("moves", "field", "fragment"),
    [
        ([([9], "exec-1")], "moves[0].bins", "bin 9 does not exist"),
        ([([1], "exec-1"), ([2, 1], "exec-0")], "moves[1].bins", "bin 1 is moved twice"),
        ([([], "exec-1")], "moves[0].bins", "at least one bin"),
        ([([1], "")], "moves[0].executor", "non-empty"),
        ([([1], "exec-9")], "moves[0].executor", "unknown executor 'exec-9'"),
    ],
)
def test_apply_moves_rejects_bad_moves(moves, field, fragment) -> None:
    current = contiguous(4, ["exec-0", "exec-1"])
    with pytest.raises(AssignmentError) as caught:
        apply_moves(current, moves, executors={"exec-0", "exec-1"})
    assert caught.value.field == field
    assert fragment in caught.value.reason
