"""The planner's view of a dataflow: an immutable DAG of operators with the semantic
properties that decide how a reconfiguration must be synchronised.

The API models (`swivel.api`) describe what a user writes; this module describes only what
the planners need, so the planners can be tested on hand-built graphs and on random DAGs
without any YAML in sight. Building a `Dataflow` validates the shape once (unknown inputs,
duplicate names, cycles), so every planner may assume a well-formed DAG.

An operator's flags are what it declares about its *function*; whether it is one-to-many
in the sense of Fries Def. 5.2 also depends on the graph. An operator sends each output
tuple down every out-edge (Swivel's runtime hands a fan-out's rows to every branch), so
an operator with two out-edges emits two (tuple, receiving operator) pairs per input: it
is one-to-many, with at most one tuple per out-edge when its function emits at most one.
A broadcast edge copies each tuple to every worker of its consumer (§7.2: "as if a
Replicate operator is added after the worker"), so it makes its source one-to-many too.
`resolve_fan_outs` applies both; the planners call it, and only an operator marked
`routes` (the paper's Split, which sends each tuple down *one* out-edge) is exempt.
"""

from __future__ import annotations

import graphlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from swivel.api.vocabulary import Cardinality, Partitioning
from swivel.controllers.errors import PlanningError


class GraphError(PlanningError):
    """A dataflow that is not a well-formed DAG. `field` names where the problem is."""


@dataclass(frozen=True, slots=True)
class Operator:
    """One logical operator. The flags are the facts the Fries pruning rules rely on."""

    name: str
    cardinality: Cardinality = Cardinality.ONE_TO_ONE
    # A one-to-many operator emitting at most one tuple per input on each out-edge
    # (a replicate): enables the edge-wise one-to-one pruning rule (Fries §6.3).
    at_most_one_per_edge: bool = False
    # Emits at most one tuple per source record (a self-join on the primary key):
    # enables the uniqueness pruning rule (Fries §6.3).
    unique_per_record: bool = False
    # Consumes all its input before emitting (aggregation, sort): splits the dataflow
    # into pipelined regions that never run at the same time (Fries §7.1).
    blocking: bool = False
    parallelism: int = 1
    # Sends each output tuple down one of its out-edges, not all of them (the Split of
    # Fries Figs. 6 and 8). Swivel's runtime has no such operator: its fan-outs copy. Kept
    # so the paper's worked examples can be planned as the paper describes them.
    routes: bool = False

    @property
    def one_to_many(self) -> bool:
        return self.cardinality is Cardinality.ONE_TO_MANY


@dataclass(frozen=True, slots=True)
class Edge:
    source: str
    target: str
    partitioning: Partitioning = Partitioning.FORWARD


@dataclass(frozen=True)
class Dataflow:
    """An immutable, validated DAG. Operator order is the order given (stable ids)."""

    operators: tuple[Operator, ...]
    edges: tuple[Edge, ...] = field(default=())
    # The operators' flags already say how they fan out (`resolve_fan_outs` ran, or this
    # is a worker graph whose hash edges to several workers send each tuple to one).
    fan_outs_resolved: bool = False

    def __post_init__(self) -> None:
        names: set[str] = set()
        for index, op in enumerate(self.operators):
            if op.name in names:
                raise GraphError(f"operators[{index}].name", f"duplicate operator {op.name!r}")
            if op.parallelism < 1:
                raise GraphError(f"operators[{index}].parallelism", "must be at least 1")
            names.add(op.name)
        for index, edge in enumerate(self.edges):
            for end in (edge.source, edge.target):
                if end not in names:
                    raise GraphError(f"edges[{index}]", f"unknown operator {end!r}")
        try:
            _ = self.topological_order
        except graphlib.CycleError as cycle:
            path = " -> ".join(cycle.args[1])
            raise GraphError("edges", f"the dataflow has a cycle: {path}") from None

    @classmethod
    def of(
        cls,
        operators: Iterable[Operator | str],
        edges: Iterable[tuple[str, str] | tuple[str, str, Partitioning] | Edge] = (),
    ) -> Dataflow:
        """Terse constructor for tests and examples: names become default operators."""
        ops = tuple(Operator(o) if isinstance(o, str) else o for o in operators)
        built: list[Edge] = []
        for e in edges:
            built.append(e if isinstance(e, Edge) else Edge(*e))
        return cls(ops, tuple(built))

    @cached_property
    def by_name(self) -> Mapping[str, Operator]:
        return {op.name: op for op in self.operators}

    @cached_property
    def parents(self) -> Mapping[str, tuple[str, ...]]:
        result: dict[str, list[str]] = {op.name: [] for op in self.operators}
        for edge in self.edges:
            result[edge.target].append(edge.source)
        return {name: tuple(ps) for name, ps in result.items()}

    @cached_property
    def children(self) -> Mapping[str, tuple[str, ...]]:
        result: dict[str, list[str]] = {op.name: [] for op in self.operators}
        for edge in self.edges:
            result[edge.source].append(edge.target)
        return {name: tuple(cs) for name, cs in result.items()}

    @cached_property
    def out_edges(self) -> Mapping[str, tuple[Edge, ...]]:
        result: dict[str, list[Edge]] = {op.name: [] for op in self.operators}
        for edge in self.edges:
            result[edge.source].append(edge)
        return {name: tuple(es) for name, es in result.items()}

    @cached_property
    def in_edges(self) -> Mapping[str, tuple[Edge, ...]]:
        result: dict[str, list[Edge]] = {op.name: [] for op in self.operators}
        for edge in self.edges:
            result[edge.target].append(edge)
        return {name: tuple(es) for name, es in result.items()}

    @cached_property
    def topological_order(self) -> tuple[str, ...]:
        """Kahn's order via the standard library; raises graphlib.CycleError on a cycle."""
        sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
        for op in self.operators:
            sorter.add(op.name, *self.parents[op.name])
        return tuple(sorter.static_order())

    @cached_property
    def out_shape(self) -> tuple[Mapping[str, int], frozenset[str], frozenset[str]]:
        """(out-degree by operator, operators with a broadcast out-edge, operators with a
        broadcast out-edge into a consumer with several workers): what fan-outs read."""
        degree = dict.fromkeys((op.name for op in self.operators), 0)
        broadcasts: set[str] = set()
        copying: set[str] = set()
        by_name = self.by_name
        for edge in self.edges:
            degree[edge.source] += 1
            if edge.partitioning is Partitioning.BROADCAST:
                broadcasts.add(edge.source)
                if by_name[edge.target].parallelism > 1:
                    copying.add(edge.source)
        return degree, frozenset(broadcasts), frozenset(copying)

    def copies_output(self, name: str) -> bool:
        """Does one output tuple of `name` go to two or more places: several out-edges (a
        fan-out copies, unless the operator `routes`), or several workers of a broadcast
        edge's consumer? (In a worker graph, hash edges to several workers count too:
        sound, more cautious.)"""
        degree, _, copying = self.out_shape
        return not self.by_name[name].routes and (degree[name] > 1 or name in copying)

    def sources(self) -> tuple[str, ...]:
        return tuple(op.name for op in self.operators if not self.parents[op.name])

    def sinks(self) -> tuple[str, ...]:
        return tuple(op.name for op in self.operators if not self.children[op.name])


def resolve_fan_outs(dataflow: Dataflow, *, broadcast: bool = True) -> Dataflow:
    """`dataflow` with every operator's cardinality as Fries Def. 5.2 reads it in the graph.

    An operator with two or more out-edges (unless it `routes`), or with a broadcast
    out-edge, is one-to-many. It emits at most one tuple per out-edge unless its function
    may emit several per input (declared one-to-many without `at_most_one_per_edge` and
    not `unique_per_record`: it stays plain one-to-many), or a broadcast edge takes it to
    a consumer with several workers: that one logical edge then carries a copy per
    worker, so at the operator level it is not one tuple per edge (the worker graph of `parallel.py` sees the
    replicate's one tuple per worker edge instead). `broadcast=False` leaves broadcast
    edges alone, for the worker graph, where an explicit replicate node stands for them.
    A dataflow marked `fan_outs_resolved` is returned as it is.

    A blocking operator that fans out loses its `blocking` flag. §7.1 cuts its out-edges
    because each record it emits starts a fresh transaction; a fan-out copies that record
    to several children, so the fresh transaction needs a head above the copies, and only
    the operator itself is there. Planned as pipelined, it is one-to-many like any other
    fan-out (sound: the cut is only ever an optimisation).

    Making an operator one-to-many only ever adds a seed the plan may need; it never
    removes one, so it is sound even where a fan-out could not actually split a record.
    """
    if dataflow.fan_outs_resolved:
        return dataflow
    return Dataflow(
        fan_out_operators(dataflow, broadcast=broadcast), dataflow.edges, fan_outs_resolved=True
    )


def fan_out_flags(
    dataflow: Dataflow, op: Operator, *, broadcast: bool = True
) -> tuple[bool, bool, bool]:
    """(one-to-many, at most one tuple per out-edge, blocking) of `op` in `dataflow` once
    its fan-out is read (Def. 5.2; the rule is `resolve_fan_outs`'s doc)."""
    declared = op.one_to_many, op.at_most_one_per_edge, op.blocking
    if dataflow.fan_outs_resolved:
        return declared
    degree, broadcasts, copying = dataflow.out_shape
    broadcasting = broadcast and op.name in broadcasts
    if not broadcasting and (degree[op.name] < 2 or op.routes):
        return declared
    # A uniqueness operator emits at most one tuple per record, so one per edge.
    several_per_edge = op.one_to_many and not op.at_most_one_per_edge and not op.unique_per_record
    copies = broadcasting and op.name in copying
    return True, not (several_per_edge or copies), False


def fan_out_operators(dataflow: Dataflow, *, broadcast: bool = True) -> tuple[Operator, ...]:
    """The operators of `resolve_fan_outs(dataflow)`, without building (and validating
    again) a new Dataflow."""
    resolved: list[Operator] = []
    for op in dataflow.operators:
        flags = fan_out_flags(dataflow, op, broadcast=broadcast)
        if flags == (op.one_to_many, op.at_most_one_per_edge, op.blocking):
            resolved.append(op)
            continue
        resolved.append(
            Operator(
                op.name,
                Cardinality.ONE_TO_MANY if flags[0] else Cardinality.ONE_TO_ONE,
                at_most_one_per_edge=flags[1],
                unique_per_record=op.unique_per_record,
                blocking=flags[2],
                parallelism=op.parallelism,
                routes=op.routes,
            )
        )
    return tuple(resolved)
