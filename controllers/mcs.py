"""Fries minimal covering sub-DAG (MCS): which operators must synchronise a reconfiguration.

Fries (§5) sends a fast control message to the *heads* of each MCS component and lets an
epoch marker travel only inside the component; every operator outside the MCS keeps
running untouched. A schedule is conflict-serializable when each source record's
transaction meets the reconfigured operators either entirely before or entirely after the
switch. Two things guarantee that, and this module computes the plan that provides both:

1. every path between two *seeds* lies inside one component (Def. 5.4, Alg. 1), and
2. a head receives at most one tuple per source record (Lemma 6.3), which is why the
   earliest one-to-many ancestors of each target become seeds too (Alg. 3), minus the
   ancestors the pruning rules show to be harmless (Alg. 4).

Choices made where the paper leaves room (the proofs are in `seeding.py`):

- *Earliest* one-to-many ancestor of a target R: a one-to-many ancestor of R that has no
  one-to-many ancestor at all. Only such an operator is guaranteed to receive one tuple
  per record, which is what Lemma 6.3's proof needs of a head.
- *Nested* one-to-many ancestors: when pruning removes an ancestor, the one-to-many
  operators below it move up. The seeds are the one-to-many ancestors of a target that
  are not pruned while every one-to-many ancestor of theirs is (Alg. 3's "earliest"
  taken over the unpruned ones).
- *Pruning rules* are §6.3's, each with the guard that keeps the result
  conflict-serializable when several targets or several uniqueness operators are
  involved (see `seeding.py`).
- *Blocking operators* (§7.1): the out-edges of every blocking operator are cut. A blocking
  operator consumes its whole input before it emits, so its input side and its output
  side never run together: it stays in the pipelined region of its inputs, where it
  processes tuples of live transactions, and every record it emits starts a fresh
  transaction in the region of its children. The MCS never contains a cut edge. A
  blocking operator that sends each emitted record to several children is planned as
  pipelined instead (`graph.resolve_fan_outs`): the fresh transaction needs a head above
  its copies.
- *Fan-outs* (Def. 5.2): an operator whose output goes to several consumers, or over a
  broadcast edge, is one-to-many whatever its kind says (`graph.resolve_fan_outs`).

Everything a plan lists is in topological order of the dataflow (component edges by
source, then target), so equal inputs give equal plans whatever the order of the targets.

Cost: O(V + E) for everything but the uniqueness rule, which is O(V + E·D) where D is the
most uniqueness operators nested on one path (one in the paper's W5). The benchmark
(`benchmarks/planner_mcs.py`) plans 10 000 operators in about 30 ms.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from .graph import Dataflow, GraphError
from .seeding import (
    EDGE_WISE_ONE_TO_ONE,
    UNIQUENESS,
    IndexedDataflow,
    index_dataflow,
    select_seeds,
)

__all__ = [
    "EDGE_WISE_ONE_TO_ONE",
    "UNIQUENESS",
    "Component",
    "McsPlan",
    "minimal_covering_subdag",
    "plan_mcs",
]


@dataclass(frozen=True)
class Component:
    """One synchronisation unit: heads get the control message, the rest follow markers."""

    operators: tuple[str, ...]  # in topological order of the dataflow
    heads: tuple[str, ...]  # operators with no in-edge inside the component
    edges: tuple[tuple[str, str], ...]  # (source, target) edges inside the component
    targets: tuple[str, ...]  # the reconfiguration operators it contains


@dataclass(frozen=True)
class McsPlan:
    """The MCS of a reconfiguration, split into components, with how the seeds were chosen."""

    components: tuple[Component, ...]  # ordered by their first operator's topological position
    targets: tuple[str, ...]
    seeds: tuple[str, ...]  # targets + the one-to-many ancestors kept (Alg. 3/4)
    # One-to-many ancestors that were candidates (all their one-to-many ancestors pruned)
    # and were pruned -> "edge-wise-one-to-one" | "uniqueness". Not hashed: a mapping.
    pruned: Mapping[str, str] = field(default_factory=dict, hash=False)

    @property
    def operators(self) -> frozenset[str]:
        return frozenset(op for c in self.components for op in c.operators)

    @property
    def edges(self) -> frozenset[tuple[str, str]]:
        return frozenset(e for c in self.components for e in c.edges)


def minimal_covering_subdag(
    dataflow: Dataflow, seeds: Iterable[str]
) -> tuple[frozenset[str], frozenset[tuple[str, str]]]:
    """Fries Alg. 1: the vertices and edges on some path between two seeds, in O(V + E).

    Red marks the seeds' descendants, blue their ancestors (both include the seeds); a
    vertex on a path between seeds is both. Every edge between two such vertices is on
    such a path (seed ~> u -> v ~> seed), so the edges need no search of their own. This is
    the bare definition: no blocking split and no one-to-many seeding (see `plan_mcs`).
    """
    graph = index_dataflow(dataflow, cut_blocking=False)
    chosen = _positions(graph, seeds, "seeds")
    vertices, edges = _cover(graph, chosen)
    names = graph.names
    return (
        frozenset(names[v] for v in vertices),
        frozenset((names[u], names[v]) for u, v in edges),
    )


def plan_mcs(dataflow: Dataflow, targets: Iterable[str], *, pruning: bool = True) -> McsPlan:
    """Fries Alg. 4 (Alg. 3 when `pruning` is False) with the §7.1 split at blocking operators.

    Every operator's cardinality is first resolved from the graph (Def. 5.2,
    `graph.resolve_fan_outs`): a fan-out or a broadcast edge makes an operator one-to-many.
    A worker graph (`parallel.parallelize`) comes resolved: a worker's hash edges to
    several workers send each tuple to one of them.
    Raises `GraphError("targets[i]", ...)` for a target the dataflow does not have.
    """
    graph = index_dataflow(dataflow, cut_blocking=True, fan_outs=True)
    wanted = _positions(graph, targets, "targets")
    selection = select_seeds(graph, wanted, pruning=pruning)
    vertices, edges = _cover(graph, selection.seeds, blue=selection.feeds_target)
    names = graph.names
    return McsPlan(
        components=_components(graph, vertices, edges, wanted),
        targets=tuple(names[t] for t in sorted(wanted)),
        seeds=tuple(names[s] for s in sorted(selection.seeds)),
        pruned=MappingProxyType({names[a]: rule for a, rule in sorted(selection.pruned.items())}),
    )


def _positions(graph: IndexedDataflow, names: Iterable[str], what: str) -> frozenset[int]:
    """Topological positions of `names`; an unknown name is the caller's error, by index."""
    found: set[int] = set()
    for index, name in enumerate(names):
        position = graph.position.get(name)
        if position is None:
            raise GraphError(f"{what}[{index}]", f"unknown operator {name!r}")
        found.add(position)
    return frozenset(found)


def _cover(
    graph: IndexedDataflow,
    seeds: frozenset[int],
    *,
    blue: Sequence[bool] | None = None,
) -> tuple[list[int], list[tuple[int, int]]]:
    """Alg. 1 on topological positions; `blue` may be passed when the caller knows it.

    Markings are pushed from an operator to its children (red) or parents (blue), so only
    marked operators cost anything. Vertices and edges come out sorted.
    """
    count = len(graph.names)
    red = _marked(seeds, count, graph.children, range(count))
    if blue is None:
        blue = _marked(seeds, count, graph.parents, reversed(range(count)))
    vertices = [v for v in range(count) if red[v] and blue[v]]
    edges: list[tuple[int, int]] = []
    for u in vertices:
        previous = -1
        for c in graph.children[u]:  # ascending; a repeat is a parallel edge
            if blue[c] and c != previous:
                edges.append((u, c))
                previous = c
    return vertices, edges


def _marked(
    seeds: frozenset[int],
    count: int,
    successors: Sequence[Sequence[int]],
    order: Iterable[int],
) -> list[bool]:
    marked = [False] * count
    for s in seeds:
        marked[s] = True
    for v in order:
        if marked[v]:
            for w in successors[v]:
                marked[w] = True
    return marked


def _components(
    graph: IndexedDataflow,
    vertices: list[int],
    edges: list[tuple[int, int]],
    targets: frozenset[int],
) -> tuple[Component, ...]:
    """Weakly connected components, each listed in topological order (Alg. 2 line 5)."""
    count = len(graph.names)
    neighbours: list[list[int]] = [[] for _ in range(count)]
    has_in_edge = [False] * count
    for u, v in edges:
        neighbours[u].append(v)
        neighbours[v].append(u)
        has_in_edge[v] = True
    label = [-1] * count
    found = 0
    for start in vertices:  # ascending: components are numbered by their first operator
        if label[start] < 0:
            label[start] = found
            stack = [start]
            while stack:
                for w in neighbours[stack.pop()]:
                    if label[w] < 0:
                        label[w] = found
                        stack.append(w)
            found += 1
    members: list[list[int]] = [[] for _ in range(found)]
    for v in vertices:
        members[label[v]].append(v)
    inside: list[list[tuple[int, int]]] = [[] for _ in range(found)]
    for u, v in edges:
        inside[label[u]].append((u, v))
    names = graph.names
    return tuple(
        Component(
            operators=tuple(names[v] for v in group),
            heads=tuple(names[v] for v in group if not has_in_edge[v]),
            edges=tuple((names[u], names[v]) for u, v in component_edges),
            targets=tuple(names[v] for v in group if v in targets),
        )
        for group, component_edges in zip(members, inside, strict=True)
    )
