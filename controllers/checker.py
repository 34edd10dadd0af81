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

Malformed input raises `ScheduleError(line, reason)`; parsing streams (`iter_events`), and
checking keeps only one set of (operator, version) pairs per record, so a few million events
need memory proportional to the distinct observations, not to the events.
"""

from __future__ import annotations

import graphlib
import itertools
import json
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

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
    "iter_events",
    "parse_schedule",
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


# --- parsing ---------------------------------------------------------------------------


def iter_events(lines: Iterable[str | bytes]) -> Iterator[Event]:
    """Parse JSON lines lazily; blank lines are skipped but still counted for line numbers.

    Lines may be bytes so that a reader can hand over raw lines and still learn *which* line
    is not UTF-8. Unknown extra fields are ignored so that producers may add timestamps or
    worker ids. Written as one loop because at a million lines every call per line shows.
    """
    for number, raw in enumerate(lines, start=1):
        text = _decode(raw, number).strip() if isinstance(raw, bytes) else raw.strip()
        if number == 1:
            text = text.removeprefix("\ufeff")  # a byte-order mark some editors write
        if not text:
            continue
        try:
            value, end = _scan_json(text)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than json's limit
            value, end = None, -1
        if end != len(text):
            value = _load_json_strictly(text, number)
        if type(value) is not dict:
            raise ScheduleError(number, f"expected a JSON object, got {_json_type(value)}")
        yield _event_from_object(value, number)


def parse_schedule(lines: Iterable[str | bytes]) -> list[Event]:
    """All events of a schedule; raises `ScheduleError` naming the first malformed line."""
    return list(iter_events(lines))


_scan_json = json.JSONDecoder().raw_decode


def _decode(raw: bytes, line: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ScheduleError(line, f"not UTF-8 text: {error}") from None


def _load_json_strictly(text: str, line: int) -> Any:
    """The slow path, taken only to word the error the way `json` does."""
    try:
        return json.loads(text)
    except ValueError as error:
        raise ScheduleError(line, f"not JSON: {error}") from None
    except RecursionError:
        raise ScheduleError(line, "not JSON this checker reads: nested too deeply") from None


def _event_from_object(obj: dict[str, Any], line: int) -> Event:
    kind = obj.get("event")
    if kind == "process":
        record, operator, version = obj.get("record"), obj.get("operator"), obj.get("version")
        # Fast path for the overwhelmingly common well-formed line; the slow path below
        # re-reads the fields only to name what is wrong.
        if (
            type(record) is str
            and type(operator) is str
            and type(version) is int
            and record
            and operator
            and "state" not in obj
        ):
            return ProcessEvent(record, operator, version, line)
        state = None if obj.get("state") is None else _int(obj, "state", line)
        return ProcessEvent(
            _name(obj, "record", line),
            _name(obj, "operator", line),
            _int(obj, "version", line),
            line,
            state,
        )
    if kind == "update":
        txn = None if obj.get("txn") is None else _int(obj, "txn", line)
        return UpdateEvent(
            _name(obj, "operator", line), _int(obj, "from", line), _int(obj, "to", line), txn, line
        )
    if "event" not in obj:
        raise ScheduleError(line, "missing field 'event'")
    if not isinstance(kind, str):
        raise ScheduleError(line, f"field 'event' must be a string, got {_json_type(kind)}")
    raise ScheduleError(line, f"unknown event {_shown(kind)} (expected 'update' or 'process')")


def _name(obj: dict[str, Any], field: str, line: int) -> str:
    value = _required(obj, field, line)
    if not isinstance(value, str) or not value:
        raise ScheduleError(
            line, f"field {field!r} must be a non-empty string, got {_shown(value)}"
        )
    return value


def _int(obj: dict[str, Any], field: str, line: int) -> int:
    value = _required(obj, field, line)
    if type(value) is not int:  # bool is an int subclass, and 1.0 is not a version
        raise ScheduleError(line, f"field {field!r} must be an integer, got {_shown(value)}")
    return value


def _required(obj: dict[str, Any], field: str, line: int) -> Any:
    if field not in obj:
        raise ScheduleError(line, f"missing field {field!r}")
    return obj[field]


def _shown(value: object) -> str:
    """A value for an error message: short, and never a failure of its own (a huge integer
    or a deeply nested array has no printable repr)."""
    try:
        text = repr(value) if isinstance(value, str | bool) or value is None else json.dumps(value)
    except (ValueError, TypeError, RecursionError):
        return _json_type(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def _json_type(value: object) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


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
