"""Function-update transactions of a recorded schedule, and the epochs they delimit.

The schedule checker (`swivel.controllers.checker`) needs to know, for every version an
updated operator ever had, during which configuration epochs it was current. Update events
arrive unordered, so this module first groups them into transactions and orders those (the
rule is in the checker's module doc and in `group_transactions`), then derives the epochs.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass


class ScheduleError(ValueError):
    """A malformed schedule. `line` is the 1-based input line that shows the problem."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason


@dataclass(frozen=True, slots=True)
class UpdateEvent:
    """Operator `operator` switched from `from_version` to `to_version`.

    `txn` optionally names the function-update transaction (its sequence number).
    """

    operator: str
    from_version: int
    to_version: int
    txn: int | None = None
    line: int = 0


# One operator at one version: (operator, version). A plain tuple, not a dataclass, because
# the checker builds and hashes one per process event and C-level tuples keep a million
# events within seconds.
OperatorVersion = tuple[str, int]


@dataclass(frozen=True, slots=True)
class UpdateStep:
    operator: str
    from_version: int
    to_version: int


@dataclass(frozen=True, slots=True)
class FunctionUpdateTransaction:
    """The updates applied together, by operator name; `txn` is the input's label, if any."""

    steps: tuple[UpdateStep, ...]
    txn: int | None = None


@dataclass(frozen=True, slots=True)
class UpdateHistory:
    """Ordered transactions plus what the checker derives from them.

    - `versions[A]`: A's versions, first to last;
    - `step_transactions[A][s]`: the position of the transaction that made A's step s;
    - `spans[(A, v)]`: the first and last epoch in which A is at v. Epoch k is the
      configuration after the first k transactions, so epochs run from 0 to m inclusive.
    """

    transactions: tuple[FunctionUpdateTransaction, ...]
    versions: Mapping[str, tuple[int, ...]]
    step_transactions: Mapping[str, tuple[int, ...]]
    spans: Mapping[OperatorVersion, tuple[int, int]]

    @classmethod
    def of(cls, transactions: Sequence[FunctionUpdateTransaction]) -> UpdateHistory:
        versions: dict[str, list[int]] = {}
        positions: dict[str, list[int]] = defaultdict(list)
        for index, transaction in enumerate(transactions):
            for step in transaction.steps:
                versions.setdefault(step.operator, [step.from_version]).append(step.to_version)
                positions[step.operator].append(index)
        last_epoch = len(transactions)
        spans: dict[OperatorVersion, tuple[int, int]] = {}
        for operator, history in versions.items():
            # Version i becomes current in the epoch after step i-1's transaction and stays
            # current up to and including the epoch just before step i takes effect.
            starts = [0] + [p + 1 for p in positions[operator]]
            ends = [*positions[operator], last_epoch]
            for version, start, end in zip(history, starts, ends, strict=True):
                spans[operator, version] = (start, end)
        return cls(
            transactions=tuple(transactions),
            versions={op: tuple(vs) for op, vs in versions.items()},
            step_transactions={op: tuple(ps) for op, ps in positions.items()},
            spans=spans,
        )


def group_transactions(updates: Sequence[UpdateEvent]) -> tuple[FunctionUpdateTransaction, ...]:
    """Group unordered update events into ordered function-update transactions.

    With `txn` labels they decide; without, step i of every operator's chain is transaction
    i (see the checker's module doc). Raises `ScheduleError` for inputs that do not describe
    one well-defined sequence of transactions.
    """
    if not updates:
        return ()
    for update in updates:
        _require_version_change(update)
        if (update.txn is None) != (updates[0].txn is None):
            labelled = update if update.txn is not None else updates[0]
            raise ScheduleError(
                update.line,
                "either every update event has a 'txn' field or none has "
                f"(line {labelled.line} has one)",
            )
    if updates[0].txn is None:
        return _group_by_step(updates)
    return _group_by_label(updates)


def _require_version_change(update: UpdateEvent) -> None:
    if update.from_version == update.to_version:
        raise ScheduleError(
            update.line,
            f"update of {update.operator!r} does not change its version ({update.from_version})",
        )


def _by_operator(updates: Iterable[UpdateEvent]) -> dict[str, list[UpdateEvent]]:
    grouped: dict[str, list[UpdateEvent]] = defaultdict(list)
    for update in updates:
        grouped[update.operator].append(update)
    return grouped


def _steps(updates: Iterable[UpdateEvent]) -> tuple[UpdateStep, ...]:
    """Steps by operator name, so that the verdict does not depend on the input's order."""
    steps = (UpdateStep(u.operator, u.from_version, u.to_version) for u in updates)
    return tuple(sorted(steps, key=lambda step: step.operator))


# --- without labels: chains and step indices -------------------------------------------


def _group_by_step(updates: Sequence[UpdateEvent]) -> tuple[FunctionUpdateTransaction, ...]:
    chains = {op: _chain(op, ups) for op, ups in _by_operator(updates).items()}
    _require_equal_lengths(chains)
    length = len(next(iter(chains.values())))
    return tuple(
        FunctionUpdateTransaction(_steps(chain[i] for chain in chains.values()))
        for i in range(length)
    )


def _chain(operator: str, updates: list[UpdateEvent]) -> list[UpdateEvent]:
    """Link one operator's updates into v0->v1->...; reject branches, gaps and cycles."""
    by_from = _unique(updates, lambda u: u.from_version, f"{operator!r} is updated from")
    by_to = _unique(updates, lambda u: u.to_version, f"{operator!r} is updated to")
    starts = [u for u in updates if u.from_version not in by_to]
    if not starts:
        raise ScheduleError(
            updates[0].line, f"the updates of {operator!r} form a cycle (a version repeats)"
        )
    if len(starts) > 1:
        first, second = sorted(starts, key=lambda u: u.line)[:2]
        raise ScheduleError(
            second.line,
            f"the updates of {operator!r} do not link into one chain: both "
            f"{first.from_version}->{first.to_version} (line {first.line}) and "
            f"{second.from_version}->{second.to_version} start one",
        )
    chain = [starts[0]]
    while chain[-1].to_version in by_from:
        chain.append(by_from[chain[-1].to_version])
    if len(chain) < len(updates):
        stray = min((u for u in updates if u not in chain), key=lambda u: u.line)
        raise ScheduleError(
            stray.line, f"the updates of {operator!r} form a cycle (a version repeats)"
        )
    return chain


def _unique(
    updates: list[UpdateEvent], key: Callable[[UpdateEvent], int], what: str
) -> dict[int, UpdateEvent]:
    seen: dict[int, UpdateEvent] = {}
    for update in sorted(updates, key=lambda u: u.line):
        version = key(update)
        if version in seen:
            raise ScheduleError(
                update.line,
                f"{what} version {version} twice (also on line {seen[version].line})",
            )
        seen[version] = update
    return seen


def _require_equal_lengths(chains: Mapping[str, list[UpdateEvent]]) -> None:
    (first_op, first), *others = chains.items()
    for operator, chain in others:
        if len(chain) != len(first):
            raise ScheduleError(
                min(u.line for u in chain),
                f"ambiguous transactions: {first_op!r} has {len(first)} update(s) "
                f"({_arrow(first)}) but {operator!r} has {len(chain)} ({_arrow(chain)}); "
                "add an integer 'txn' field to every update to say which transaction "
                "each belongs to",
            )


def _arrow(chain: list[UpdateEvent]) -> str:
    return "->".join(str(v) for v in [chain[0].from_version] + [u.to_version for u in chain])


# --- with labels ------------------------------------------------------------------------


def _group_by_label(updates: Sequence[UpdateEvent]) -> tuple[FunctionUpdateTransaction, ...]:
    by_label: dict[int, dict[str, UpdateEvent]] = defaultdict(dict)
    for update in sorted(updates, key=lambda u: u.line):
        assert update.txn is not None  # group_transactions checked that all are labelled
        same = by_label[update.txn]
        if update.operator in same:
            raise ScheduleError(
                update.line,
                f"{update.operator!r} is updated twice in txn {update.txn} "
                f"(also on line {same[update.operator].line})",
            )
        same[update.operator] = update
    ordered = sorted(by_label.items())
    for operator, ups in _by_operator(u for _, same in ordered for u in same.values()).items():
        _require_linked(operator, ups)
    return tuple(FunctionUpdateTransaction(_steps(same.values()), label) for label, same in ordered)


def _require_linked(operator: str, updates: list[UpdateEvent]) -> None:
    """In txn order, each update must start where the previous one ended, never going back."""
    seen = {updates[0].from_version: updates[0]}
    for previous, update in itertools.pairwise(updates):
        if update.from_version != previous.to_version:
            raise ScheduleError(
                update.line,
                f"{operator!r} is updated from version {update.from_version} in txn "
                f"{update.txn}, but txn {previous.txn} (line {previous.line}) left it at "
                f"version {previous.to_version}",
            )
    for update in updates:
        if update.to_version in seen:
            raise ScheduleError(
                update.line,
                f"{operator!r} returns to version {update.to_version} in txn {update.txn}; "
                "versions may not repeat, or a record at that version fits no single epoch "
                "(give the restored function a new version number)",
            )
        seen[update.to_version] = update
