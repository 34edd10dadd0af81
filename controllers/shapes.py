"""Which physical steps a DAG-shaped dataflow compiles into: the decisions, without Spark.

`plan_shape(job)` checks what the runtime can run and cuts the operators into steps that
`compiling.compile_job` turns into one Structured Streaming query:

- a **keyed step** per keyed operator: the union of its inputs' DataFrames, then
  `groupBy(key).transformWithStateInPandas` (Spark hashes the key into `bins` partitions,
  so hash edges into a keyed operator are the groupBy's own shuffle);
- a **region** per group of stateless operators that one `mapInPandas` runs chunk by
  chunk. A region reads one entry frame (the output of one *producer*, or the union of its
  first operator's inputs, repartitioned by key when that operator has hash in-edges) and
  runs a sub-DAG over each Arrow chunk: a fan-out hands the same pandas rows to every
  branch, a merge concatenates its inputs' rows. So a diamond
  `parse -> {a, b} -> union` is one Python pass in which every operator sees each row once,
  and all of a region's operators read one configuration snapshot per chunk (see
  `regions.ChunkView`). A region has exactly one exit (one operator whose output leaves
  it); a group that would have several is cut back into linear chains.
- a **blocking step** per stateless blocking operator (an `aggregate`, or any operator
  marked `blocking: true`): the union of its inputs, a shuffle (`repartition(bins, key)`
  by its key, or into one partition when it has none), then a `mapInPandas` that takes
  its partition's whole input before it calls the function once. The shuffle's stage
  barrier means every upstream task of the micro-batch has ended before the operator
  emits anything: its input side and its output side never run together, which is what
  the planner's cut at blocking operators (Fries §7.1) assumes. A keyed operator marked
  blocking is already such a step: it always reads through the groupBy's shuffle, and
  `transformWithStateInPandas` sorts its partition's input by key before the first group.
  Neither kind is ever fused into a region with its inputs or its consumers;
- every sink operator's inputs are unioned into the job's one sink (`spec.sink`: the
  StreamJob model has one sink per job, so several sink operators all write there).

A DataFrame read by more than one step (a fan-out the regions could not keep inside one
pass: branches that meet only after a keyed operator, or several sinks) is a **split**:
Spark evaluates the shared upstream plan once per reader, so every operator above it runs
once per branch (`Shape.replicated`). That is refused for keyed operators (their state
would be kept once per branch); stateless ones run twice (same rows: a micro-batch's
offsets are fixed, so the source yields the same rows each time).

Merges (an operator or the sink with several inputs) and what else the runtime refuses,
with a `CompileError(field, reason)`, are in `shape_refusals`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from swivel.api.dataflow import OperatorKind, OperatorSpec
from swivel.api.streamjob import StreamJobSpec
from swivel.controllers.shape_refusals import (
    CompileError,
    check_operator,
    field_of,
    hash_key,
    merged_columns,
)

__all__ = [
    "BlockingStep",
    "CompileError",
    "KeyedStep",
    "Region",
    "Shape",
    "merged_columns",
    "plan_shape",
]


@dataclass(frozen=True)
class Region:
    """Stateless operators one `mapInPandas` runs over each Arrow chunk.

    The entry frame is `producer`'s output when set, else the union of the first
    operator's inputs; `hashed` is the key the entry frame is repartitioned by. Inside, an
    input named `producer` (or any input of the first operator when there is no producer)
    is the chunk itself.
    """

    operators: tuple[str, ...]  # topological order; operators[0] is the entry operator
    exit: str
    producer: str | None
    hashed: str | None = None
    linear: bool = True  # a chain a -> b -> c (no fan-out or merge inside)


@dataclass(frozen=True)
class KeyedStep:
    operator: str


@dataclass(frozen=True)
class BlockingStep:
    """A stateless blocking operator: shuffled by `key` (one partition when None), then run
    once over each partition's whole input of the micro-batch."""

    operator: str
    key: str | None


Step = Region | KeyedStep | BlockingStep


@dataclass(frozen=True)
class Shape:
    source: str
    sinks: tuple[str, ...]
    order: tuple[str, ...]  # every operator, topological: source first, sinks last
    inputs: Mapping[str, tuple[str, ...]]
    consumers: Mapping[str, tuple[str, ...]]
    steps: tuple[Step, ...]
    # Operators Spark evaluates once per reader of a shared DataFrame (a split fan-out).
    replicated: frozenset[str]
    # frame (operator name) -> the steps or sinks reading it, when more than one.
    splits: Mapping[str, tuple[str, ...]]
    function_operators: int


def plan_shape(job: StreamJobSpec) -> Shape:
    """Check the dataflow and cut it into steps (see the module doc); CompileError if refused."""
    ops = job.dataflow.operators
    by_name = {op.name: op for op in ops}
    inputs = {op.name: tuple(edge.from_ for edge in op.inputs) for op in ops}
    consumers_list: dict[str, list[str]] = {op.name: [] for op in ops}
    for op in ops:
        for edge in op.inputs:
            consumers_list[edge.from_].append(op.name)
    consumers = {name: tuple(c) for name, c in consumers_list.items()}

    sources = [op.name for op in ops if op.kind is OperatorKind.SOURCE]
    if len(sources) != 1:
        raise CompileError(
            "spec.dataflow.operators",
            f"the runtime needs exactly one source (the job has one spec.source), got {sources}",
        )
    sinks = [op.name for op in ops if op.kind is OperatorKind.SINK]
    for op in ops:
        check_operator(op, consumers[op.name])
    if not sinks:
        raise CompileError("spec.dataflow.operators", "the dataflow needs a sink operator")

    topological = _topological(ops, inputs)
    sinks.sort(key=topological.index)
    body = [name for name in topological if name != sources[0] and name not in sinks]
    order = (sources[0], *body, *sinks)
    steps = _steps(body, by_name, inputs, consumers)
    splits, replicated = _splits(steps, inputs, sinks, by_name)
    function_operators = sum(1 for op in ops if op.function is not None)
    return Shape(
        source=sources[0],
        sinks=tuple(sinks),
        order=order,
        inputs=inputs,
        consumers=consumers,
        steps=steps,
        replicated=replicated,
        splits=splits,
        function_operators=function_operators,
    )


def _topological(ops: Sequence[OperatorSpec], inputs: Mapping[str, tuple[str, ...]]) -> list[str]:
    # Kahn's algorithm, ties broken by manifest order (stable, readable plans).
    position = {op.name: i for i, op in enumerate(ops)}
    waiting = {op.name: len(set(inputs[op.name])) for op in ops}
    children: dict[str, set[str]] = {op.name: set() for op in ops}
    for name, ins in inputs.items():
        for i in set(ins):
            children[i].add(name)
    ready = sorted((n for n, w in waiting.items() if w == 0), key=position.__getitem__)
    order: list[str] = []
    while ready:
        name = ready.pop(0)
        order.append(name)
        for child in children[name]:
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
        ready.sort(key=position.__getitem__)
    if len(order) != len(ops):  # the API model refuses cycles; keep the runtime honest
        raise CompileError("spec.dataflow.operators", "the dataflow has a cycle")
    return order


@dataclass
class _Group:
    operators: list[str]
    producer: str | None
    hashed: str | None


def _steps(
    body: Sequence[str],
    by_name: Mapping[str, OperatorSpec],
    inputs: Mapping[str, tuple[str, ...]],
    consumers: Mapping[str, tuple[str, ...]],
) -> tuple[Step, ...]:
    groups: list[_Group] = []
    group_of: dict[str, int] = {}
    by_producer: dict[str, int] = {}
    # ("group", index) | ("keyed", name) | ("blocking", name), in order
    emitted: list[tuple[str, int | str]] = []

    for name in body:
        op = by_name[name]
        if op.kind is OperatorKind.KEYED:
            emitted.append(("keyed", name))
            continue
        if op.resolved_blocking:
            # Never in a group: its consumers read its output as a producer's frame.
            emitted.append(("blocking", name))
            continue
        ins = inputs[name]
        hashed = hash_key(op)
        joined: int | None = None
        if hashed is None:
            joined = _joinable(ins, groups, group_of, by_producer)
        if joined is not None:
            groups[joined].operators.append(name)
            group_of[name] = joined
            continue
        distinct = set(ins)
        producer = ins[0] if len(distinct) == 1 and hashed is None else None
        groups.append(_Group([name], producer, hashed))
        group_of[name] = len(groups) - 1
        if producer is not None and producer not in by_producer:
            by_producer[producer] = len(groups) - 1
        emitted.append(("group", len(groups) - 1))

    steps: list[Step] = []
    for kind, ref in emitted:
        if kind == "keyed":
            assert isinstance(ref, str)
            steps.append(KeyedStep(ref))
            continue
        if kind == "blocking":
            assert isinstance(ref, str)
            steps.append(BlockingStep(ref, by_name[ref].key or hash_key(by_name[ref])))
            continue
        assert isinstance(ref, int)
        steps.extend(_regions(groups[ref], inputs, consumers))
    return tuple(steps)


def _joinable(
    ins: Sequence[str],
    groups: Sequence[_Group],
    group_of: Mapping[str, int],
    by_producer: Mapping[str, int],
) -> int | None:
    """The group an operator with forward in-edges `ins` can run in, if any."""
    candidates = {group_of[i] for i in ins if i in group_of}
    if not candidates and len(set(ins)) == 1 and ins[0] in by_producer:
        candidates = {by_producer[ins[0]]}
    if len(candidates) != 1:
        return None
    index = next(iter(candidates))
    group = groups[index]
    for i in ins:
        if group_of.get(i) != index and i != group.producer:
            return None
    return index


def _exits(group: _Group, consumers: Mapping[str, tuple[str, ...]]) -> list[str]:
    members = set(group.operators)
    return [n for n in group.operators if any(c not in members for c in consumers[n])]


def _regions(
    group: _Group,
    inputs: Mapping[str, tuple[str, ...]],
    consumers: Mapping[str, tuple[str, ...]],
    *,
    recut: bool = True,
) -> list[Region]:
    exits = _exits(group, consumers)
    ops = group.operators
    linear = all(
        inputs[n] == (prev,) and consumers[prev] == (n,) for prev, n in itertools.pairwise(ops)
    )
    if len(exits) == 1:
        return [Region(tuple(group.operators), exits[0], group.producer, group.hashed, linear)]
    if recut:
        # Several exits: one pass cannot hand its rows to several readers. First cut the
        # group after each exit (its output becomes a frame its in-group consumers read as
        # their producer: `parse -> {k (keyed), a, b} , a, b -> union` keeps a, b and the
        # union in one pass); each part that still has several exits becomes linear chains.
        return [
            region
            for part in _cut_at(group, set(exits), inputs)
            for region in _regions(part, inputs, consumers, recut=False)
        ]
    # Cut it back into linear chains; the shared outputs become split fan-outs.
    chains: list[list[str]] = []
    chain_of: dict[str, int] = {}
    for name in group.operators:
        ins = inputs[name]
        if len(ins) == 1 and ins[0] in chain_of and consumers[ins[0]] == (name,):
            chain = chain_of[ins[0]]
            chains[chain].append(name)
            chain_of[name] = chain
            continue
        chains.append([name])
        chain_of[name] = len(chains) - 1
    regions = []
    for chain_members in chains:
        first = chain_members[0]
        ins = inputs[first]
        if first == group.operators[0]:
            producer, hashed = group.producer, group.hashed
        else:
            producer, hashed = (ins[0] if len(set(ins)) == 1 else None), None
        regions.append(Region(tuple(chain_members), chain_members[-1], producer, hashed, True))
    return regions


def _cut_at(
    group: _Group, barrier: set[str], inputs: Mapping[str, tuple[str, ...]]
) -> list[_Group]:
    """Regroup `group`'s operators so that no part runs an operator of `barrier` and one
    of its consumers: a barrier's output is a frame, read by its consumers' part."""
    parts: list[_Group] = []
    part_of: dict[str, int] = {}
    by_producer: dict[str, int] = {}
    for name in group.operators:
        ins = inputs[name]
        joined = None
        if name != group.operators[0]:
            inside = {n: i for n, i in part_of.items() if n not in barrier}
            joined = _joinable(ins, parts, inside, by_producer)
        if joined is not None:
            parts[joined].operators.append(name)
            part_of[name] = joined
            continue
        if name == group.operators[0]:
            parts.append(_Group([name], group.producer, group.hashed))
        else:
            producer = ins[0] if len(set(ins)) == 1 else None
            parts.append(_Group([name], producer, None))
            if producer is not None and producer not in by_producer:
                by_producer[producer] = len(parts) - 1
        part_of[name] = len(parts) - 1
        if name == group.operators[0] and group.producer is not None:
            by_producer.setdefault(group.producer, 0)
    return parts


def _reads(step: Step, inputs: Mapping[str, tuple[str, ...]]) -> list[str]:
    """The frames (by the operator producing them) a step reads from outside itself."""
    if isinstance(step, KeyedStep | BlockingStep):
        return list(inputs[step.operator])
    if step.producer is not None:
        return [step.producer]
    return list(inputs[step.operators[0]])


def _splits(
    steps: Sequence[Step],
    inputs: Mapping[str, tuple[str, ...]],
    sinks: Sequence[str],
    by_name: Mapping[str, OperatorSpec],
) -> tuple[dict[str, tuple[str, ...]], frozenset[str]]:
    readers: dict[str, list[str]] = {}
    for step in steps:
        reader = step.operator if isinstance(step, KeyedStep | BlockingStep) else step.operators[0]
        for frame in _reads(step, inputs):
            readers.setdefault(frame, []).append(reader)
    for sink in sinks:
        for frame in inputs[sink]:
            readers.setdefault(frame, []).append(sink)
    splits = {frame: tuple(r) for frame, r in readers.items() if len(r) > 1}
    replicated: set[str] = set()
    for frame in splits:
        replicated |= _ancestors_or_self(frame, inputs)
    for frame, split_readers in splits.items():
        for name in sorted(_ancestors_or_self(frame, inputs)):
            if by_name[name].kind is OperatorKind.KEYED:
                raise CompileError(
                    field_of(name),
                    f"keyed operator {name!r} would run once per reader of {frame!r}'s output "
                    f"({list(split_readers)}): Spark evaluates a shared input once per "
                    "branch, so its state would be kept twice. Merge the branches below "
                    f"{frame!r} in stateless operators before any keyed one, or feed one sink",
                )
    return splits, frozenset(replicated)


def _ancestors_or_self(name: str, inputs: Mapping[str, tuple[str, ...]]) -> set[str]:
    seen = {name}
    stack = [name]
    while stack:
        for parent in inputs[stack.pop()]:
            if parent not in seen:
                seen.add(parent)
                stack.append(parent)
    return seen
