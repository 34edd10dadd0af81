"""Bin placements: which executor serves each state partition (Megaphone's bins).

A job's keys hash into a fixed number of bins (Spark's state partitions, fixed per
checkpoint), so the planners never reason about keys, only about the placement
`bin -> executor`. Megaphone calls it the configuration `(time, bin) -> worker`; here time
is implicit: an `Assignment` is the placement at one micro-batch boundary.

The functions are pure and return fresh dicts, so a plan can be computed, printed and
diffed without touching Spark. Two ways to get a target placement live here: a rescale
(`rebalance_for_executors`: balanced, with as few moves as possible, because every moved
bin is reloaded from the checkpoint by its new executor) and explicit user moves
(`apply_moves`). The bin count need not be a power of two for any of this arithmetic; the
API enforces that for real jobs.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from swivel.controllers.errors import PlanningError

Assignment = Mapping[int, str]
"""Bin -> executor id. Total over `0..n-1`: every bin lives on exactly one executor."""


class AssignmentError(PlanningError):
    """A placement or a move that cannot be applied. `field` names where the problem is."""


def validate_assignment(
    assignment: Assignment,
    *,
    field: str = "assignment",
    bins: int | None = None,
    executors: Collection[str] | None = None,
) -> None:
    """Raise `AssignmentError` unless every bin `0..n-1` is placed on a named executor.

    A mapping cannot hold a bin twice, so "exactly once" means: no bin missing, none extra.
    `bins` pins `n` (e.g. the checkpoint's partition count); `executors`, when given, is
    the set of executors that may hold bins (a placement on an unknown executor would
    silently send a bin nowhere).
    """
    for bin_id, executor in assignment.items():
        if not isinstance(bin_id, int) or isinstance(bin_id, bool) or bin_id < 0:
            raise AssignmentError(field, f"bin {bin_id!r} is not a non-negative integer")
        if not isinstance(executor, str) or not executor:
            raise AssignmentError(f"{field}[{bin_id}]", "executor id must be a non-empty string")
        if executors is not None and executor not in executors:
            raise AssignmentError(f"{field}[{bin_id}]", f"unknown executor {executor!r}")
    count = len(assignment) if bins is None else bins
    if count < 1:
        raise AssignmentError(field, "at least one bin is needed")
    missing = sorted(set(range(count)) - assignment.keys())
    if missing:
        raise AssignmentError(field, f"bins {missing} are not assigned (expected 0..{count - 1})")
    extra = sorted(assignment.keys() - set(range(count)))
    if extra:
        raise AssignmentError(field, f"bins {extra} are out of range 0..{count - 1}")


def validate_same_bins(current: Assignment, target: Assignment) -> None:
    """Both placements must be valid and cover the same bins: the bin count is fixed."""
    validate_assignment(current, field="current")
    validate_assignment(target, field="target", bins=len(current))


def bins_by_executor(
    assignment: Assignment, executors: Sequence[str] = ()
) -> dict[str, tuple[int, ...]]:
    """Each executor's bins, sorted. Executors named in `executors` appear even when empty
    (a fresh executor holds no bins until some are moved to it)."""
    owned: dict[str, list[int]] = {executor: [] for executor in executors}
    for bin_id in sorted(assignment):
        owned.setdefault(assignment[bin_id], []).append(bin_id)
    return {executor: tuple(owned[executor]) for executor in sorted(owned)}


def bins_per_executor(assignment: Assignment, executors: Sequence[str] = ()) -> dict[str, int]:
    """Each executor's load in bins (the StreamJob status shows this), empty ones included."""
    return {e: len(bins) for e, bins in bins_by_executor(assignment, executors).items()}


def changed_bins(current: Assignment, target: Assignment) -> tuple[int, ...]:
    """The bins whose executor differs: exactly the bins a migration has to move."""
    return tuple(b for b in sorted(current) if current[b] != target[b])


def is_balanced(assignment: Assignment, executors: Sequence[str]) -> bool:
    """Loads over `executors` (empty ones included) differ by at most one bin."""
    if not set(assignment.values()) <= set(executors):
        return False
    loads = bins_per_executor(assignment, executors).values()
    return max(loads) - min(loads) <= 1


def rebalance_for_executors(current: Assignment, executors: Sequence[str]) -> dict[int, str]:
    """A balanced placement over `executors` that moves as few bins as possible.

    With `n` bins and `k` executors each executor gets `n // k` bins and `n % k` of them one
    more. An executor keeps `min(load, quota)` of its bins, so the extra bins go to the
    executors that hold the most now (ties in the order of `executors`): that maximises the
    bins kept, i.e. minimises moves. Executors not in `executors` are drained; new ones
    receive. Surplus executors keep their lowest bins and give away the highest; the freed
    bins fill the under-loaded executors in `executors` order, lowest bins first.
    """
    validate_assignment(current, field="current")
    _validate_executor_list(executors)
    loads = bins_by_executor(current, executors)
    quotas = _quotas(len(current), executors, {e: len(loads[e]) for e in executors})
    target = dict(current)
    freed = iter(_free_surplus_bins(loads, quotas))
    for executor in executors:
        deficit = quotas[executor] - min(len(loads[executor]), quotas[executor])
        for _ in range(deficit):
            target[next(freed)] = executor
    return target


def apply_moves(
    current: Assignment,
    moves: Sequence[tuple[Sequence[int], str]],
    *,
    executors: Collection[str] | None = None,
) -> dict[int, str]:
    """The placement after explicit user moves, e.g. `[([3, 5], "exec-2")]`.

    A bin named twice is rejected rather than resolved by order: two moves of one bin in a
    single request are almost certainly a mistake. Moving a bin to where it already is,
    is a no-op. `executors`, when given, restricts the targets to known executors.
    """
    validate_assignment(current, field="current")
    target = dict(current)
    seen: set[int] = set()
    for index, (bins, executor) in enumerate(moves):
        if not isinstance(executor, str) or not executor:
            raise AssignmentError(f"moves[{index}].executor", "must be a non-empty string")
        if executors is not None and executor not in executors:
            raise AssignmentError(f"moves[{index}].executor", f"unknown executor {executor!r}")
        if not bins:
            raise AssignmentError(f"moves[{index}].bins", "name at least one bin")
        for bin_id in bins:
            if bin_id not in current:
                raise AssignmentError(f"moves[{index}].bins", f"bin {bin_id!r} does not exist")
            if bin_id in seen:
                raise AssignmentError(f"moves[{index}].bins", f"bin {bin_id} is moved twice")
            seen.add(bin_id)
            target[bin_id] = executor
    return target


def _validate_executor_list(executors: Sequence[str]) -> None:
    if not executors:
        raise AssignmentError("executors", "at least one executor is needed")
    for index, executor in enumerate(executors):
        if not isinstance(executor, str) or not executor:
            raise AssignmentError(f"executors[{index}]", "must be a non-empty string")
    if len(set(executors)) != len(executors):
        raise AssignmentError("executors", "executor ids must be distinct")


def _quotas(bins: int, executors: Sequence[str], loads: Mapping[str, int]) -> dict[str, int]:
    """`n // k` each; the `n % k` extra bins go to the most loaded executors (stable)."""
    base, extra = divmod(bins, len(executors))
    by_load = sorted(executors, key=lambda e: -loads[e])  # sorted() is stable
    lucky = set(by_load[:extra])
    return {e: base + (1 if e in lucky else 0) for e in executors}


def _free_surplus_bins(
    loads: Mapping[str, tuple[int, ...]], quotas: Mapping[str, int]
) -> list[int]:
    """Bins that must leave their executor: all of a drained one's, the top of a surplus."""
    freed: list[int] = []
    for executor, bins in loads.items():
        freed.extend(bins[quotas.get(executor, 0) :])
    return sorted(freed)
