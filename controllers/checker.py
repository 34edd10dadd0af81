"""Is a recorded reconfiguration schedule consistent? (Fries §4.2, conflict-serializability.)

The processing of one source record, by every operator its derived tuples reach, is a *data
transaction*; a reconfiguration is a *function-update transaction* that switches each of its
operators from a `from` version to a `to` version. Data transactions never conflict with
each other; a data operation conflicts with the update of the operator it runs on, and its
version says on which side of that update it ran. So the schedule is correct exactly when
every record could have run entirely between two consecutive update transactions: it saw
"all old" or "all new" (per-record rule, `check_schedule`). The textbook precedence graph
(`precedence_graph`, update transactions chained in their sequence) gives the same verdict
and is kept as an independent cross-check.

A schedule is a list of events, in any order (they are usually gathered from many workers):

- `UpdateEvent` - operator A switched from version `from` to version `to`;
- `ProcessEvent` - a tuple derived from source record r was processed by A under a version;
  for a keyed operator, optionally also the version its key's state was at (`state`).

**Keyed state.** A state transform is part of the update transaction: it writes the state
of every key of the operator (lazily, at the key's first row under the new version). A
tuple that runs on a key's state reads and writes it, so it conflicts with that write: a
tuple processed under the old function on state the transform had already brought to the
new version ran *after* the update on the state and *before* it on the function, a cycle.
The checker takes the state's version as one more observation of the record on that
operator, so such a record (`A@1` on state at 2) has no single epoch and is a violation,
exactly like a record seen at `A@1` and `A@2`. Events without `state` (stateless
operators, and every schedule written before it existed) are judged as before.

**Epochs.** With update transactions T0..T(m-1) in order, epoch k (0 <= k <= m) is the
configuration after T0..T(k-1): every operator at the version the first k transactions left
it at. A record is consistent iff one epoch explains every (operator, version) it shows on an
updated operator. Each such pair holds during one contiguous range of epochs (versions never
repeat in an operator's history, see below), so the test is an interval intersection: O(1)
per observation, whatever the number of transactions. The common single-transaction case is
the special case old = epoch 0, new = epoch 1. Operators no transaction updates conflict with
nothing and are ignored; a record processed twice by one operator under two versions (a
one-to-many fan-out split by the switch) has no single epoch and is a violation.

**Grouping updates into transactions** (input order carries no meaning):

- If update events carry an integer `txn`, it is the transaction's sequence number: updates
  with equal `txn` form one transaction and transactions run in increasing `txn` order. An
  operator appears at most once per transaction, and in `txn` order each of its updates must
  start from the version the previous one reached. Either every update has a `txn` or none
  (`"txn": null` counts as none).
- Without `txn`, each operator's updates must link into one chain v0->v1->...->vs (matching
  `to` with the next `from`); step i of every operator belongs to transaction Ti. This is
  only unambiguous when every updated operator has the same number of steps, so otherwise
  the input is rejected and the message asks for `txn` fields.
- A version may not reappear in one operator's history (1->2 then 2->1): a record showing
  A@1 could not be placed in one epoch. A restored function needs a fresh version number.

Malformed input raises `ScheduleError(line, reason)`; reading JSON lines into events
streams (`iter_events`, controllers/schedule_parsing.py), and checking keeps only one set
of (operator, version) pairs per record, so a few million events need memory proportional
to the distinct observations, not to the events.
"""

from __future__ import annotations

import graphlib
import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from swivel.controllers.update_history import (
    FunctionUpdateTransaction,
    OperatorVersion,
    ScheduleError,
    UpdateEvent,
    UpdateHistory,
    UpdateStep,
    group_transactions,
)

__all__ = [
    "Event",
    "FunctionUpdateTransaction",
    "Node",
    "Observation",
    "ProcessEvent",
    "RecordNode",
    "ScheduleError",
    "TransactionNode",
    "UpdateEvent",
    "UpdateStep",
    "Verdict",
    "Violation",
    "check_schedule",
    "is_acyclic",
    "precedence_graph",
]


@dataclass(frozen=True, slots=True)
class ProcessEvent:
    """A tuple derived from source record `record` was processed by `operator` at `version`."""

    record: str
    operator: str
    version: int
    line: int = 0
    # The version the key's state was at when the tuple ran on it (keyed operators only):
    # the runtime brings a key's state to the function's version before running it, so it
    # differs from `version` only when an old function ran on transformed state.
    state: int | None = None


Event = UpdateEvent | ProcessEvent


# --- checking --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, order=True)
class Observation:
    """A record's tuple was processed by `operator` under `version`, or (`state`) ran on a
    key whose state was at `version`."""

    operator: str
    version: int
    state: bool = False


@dataclass(frozen=True, slots=True)
class Violation:
    """A record no single epoch explains.

    `new` holds the observations that need the latest epoch any of them needs; `old` holds
    those whose version had already been replaced by then. With one transaction that is
    exactly "processed under the from-version" versus "under the to-version".
    """

    record: str
    old: tuple[Observation, ...]
    new: tuple[Observation, ...]

    def describe(self) -> str:
        """One line for people, e.g. `r7: A@old(1) but B@new(2)`."""
        old = ", ".join(_shown_observation(o, "old") for o in self.old)
        new = ", ".join(_shown_observation(o, "new") for o in self.new)
        return f"{self.record}: {old} but {new}"


def _shown_observation(observation: Observation, side: str) -> str:
    what = f"{observation.operator}.state" if observation.state else observation.operator
    return f"{what}@{side}({observation.version})"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of a check: the transactions found, the counts, and every violation.

    Violations are in the order their records first appear in the input.
    """

    records: int
    process_events: int
    transactions: tuple[FunctionUpdateTransaction, ...]
    violations: tuple[Violation, ...]

    @property
    def serializable(self) -> bool:
        return not self.violations

    @property
    def versions(self) -> Mapping[str, tuple[int, ...]]:
        """Each updated operator's version history, first version first."""
        return UpdateHistory.of(self.transactions).versions


@dataclass(frozen=True, slots=True)
class _Collected:
    """What checking needs from the events: O(distinct observations), not O(events)."""

    history: UpdateHistory
    observations: Mapping[str, AbstractSet[OperatorVersion]]
    process_events: int
    # record -> the state reads that differ from the function version (rare: only an old
    # function on transformed state), kept apart to name them in a violation
    state_reads: Mapping[str, AbstractSet[OperatorVersion]]


def check_schedule(events: Iterable[Event]) -> Verdict:
    """Decide conflict-serializability by the per-record epoch rule (see the module doc).

    Raises `ScheduleError` for malformed schedules, including a process event on an updated
    operator under a version that operator never had.
    """
    collected = _collect(events)
    history = collected.history
    violations = []
    for record, observations in collected.observations.items():
        state_reads = collected.state_reads.get(record, frozenset())
        violation = _violation(record, observations, history, state_reads)
        if violation is not None:
            violations.append(violation)
    return Verdict(
        records=len(collected.observations),
        process_events=collected.process_events,
        transactions=history.transactions,
        violations=tuple(violations),
    )


def _collect(events: Iterable[Event]) -> _Collected:
    updates: list[UpdateEvent] = []
    first_line: dict[OperatorVersion, int] = {}
    observations: defaultdict[str, set[OperatorVersion]] = defaultdict(set)
    state_reads: defaultdict[str, set[OperatorVersion]] = defaultdict(set)
    count = 0
    for event in events:
        if type(event) is ProcessEvent:
            seen = (event.operator, event.version)
            if seen not in first_line:
                first_line[seen] = event.line
            observations[event.record].add(seen)
            if event.state is not None and event.state != event.version:
                read = (event.operator, event.state)
                first_line.setdefault(read, event.line)
                observations[event.record].add(read)
                state_reads[event.record].add(read)
            count += 1
        elif isinstance(event, UpdateEvent):
            updates.append(event)
        else:
            raise TypeError(f"not a schedule event: {event!r}")
    history = UpdateHistory.of(group_transactions(updates))
    _reject_unknown_versions(first_line, history)
    return _Collected(history, observations, count, state_reads)


def _reject_unknown_versions(
    first_line: Mapping[OperatorVersion, int], history: UpdateHistory
) -> None:
    # Checked once per distinct (operator, version) because the updates may come last.
    for (operator, version), line in first_line.items():
        known = history.versions.get(operator)
        if known is not None and version not in known:
            raise ScheduleError(
                line,
                f"operator {operator!r} is updated but never had version {version} "
                f"(its versions: {_arrow(known)})",
            )


def _violation(
    record: str,
    observations: AbstractSet[OperatorVersion],
    history: UpdateHistory,
    state_reads: AbstractSet[OperatorVersion] = frozenset(),
) -> Violation | None:
    spans = history.spans
    latest_start, earliest_end = 0, len(history.transactions)
    for seen in observations:
        span = spans.get(seen)
        if span is not None:
            latest_start = max(latest_start, span[0])
            earliest_end = min(earliest_end, span[1])
    if latest_start <= earliest_end:
        return None
    # A state read is named as one (`A.state@new(2)`): it is the observation to explain.
    shown = [
        Observation(*seen, state=seen in state_reads)
        for seen in sorted(observations)
        if seen in spans
    ]
    old = tuple(o for o in shown if spans[o.operator, o.version][1] < latest_start)
    new = tuple(o for o in shown if spans[o.operator, o.version][1] >= latest_start)
    return Violation(record, old, new)


def _arrow(versions: Sequence[int]) -> str:
    return "->".join(str(v) for v in versions)


# --- the precedence-graph view ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TransactionNode:
    """The function-update transaction at position `index` in the update sequence."""

    index: int


@dataclass(frozen=True, slots=True)
class RecordNode:
    """The data transaction of one source record."""

    record: str


Node = TransactionNode | RecordNode


def precedence_graph(events: Iterable[Event]) -> dict[Node, set[Node]]:
    """The conflict (precedence) graph: node -> the nodes that must come after it.

    A data operation of record r on operator A under a version A reached by step s of its
    history follows A's updates 0..s-1 and precedes updates s.. - one edge per conflicting
    pair. Update transactions are also chained T0 -> T1 -> ...: they are issued one at a
    time (Fries considers one reconfiguration at a time), so their order is a fact of the
    schedule that a serial order must keep, and it is what makes "epoch" well defined.
    Without those edges, two transactions on disjoint operators could be swapped, and the
    graph would accept records the epoch rule rightly rejects.
    """
    collected = _collect(events)
    history = collected.history
    graph: dict[Node, set[Node]] = defaultdict(set)
    nodes = [TransactionNode(k) for k in range(len(history.transactions))]
    for earlier, later in itertools.pairwise(nodes):
        graph[earlier].add(later)
    for record, observations in collected.observations.items():
        node = RecordNode(record)
        graph[node] = set()
        for observation in observations:
            _add_conflict_edges(graph, node, observation, history)
    return dict(graph)


def _add_conflict_edges(
    graph: dict[Node, set[Node]], node: RecordNode, seen: OperatorVersion, history: UpdateHistory
) -> None:
    operator, version = seen
    versions = history.versions.get(operator)
    if versions is None:
        return  # no transaction updates this operator: nothing conflicts with it
    reached_at_step = versions.index(version)
    for step, index in enumerate(history.step_transactions[operator]):
        update = TransactionNode(index)
        if step < reached_at_step:
            graph[update].add(node)
        else:
            graph[node].add(update)


def is_acyclic(graph: Mapping[Node, Iterable[Node]]) -> bool:
    """A schedule is conflict-serializable iff its precedence graph has no cycle."""
    sorter: graphlib.TopologicalSorter[Node] = graphlib.TopologicalSorter()
    for node, successors in graph.items():
        sorter.add(node)
        for successor in successors:
            sorter.add(successor, node)
    try:
        sorter.prepare()
    except graphlib.CycleError:
        return False
    return True
