"""Chi's meta-topology (§4.2.1) for a change of bin placement.

Chi reconfigures a graph G into G* through an intermediate G' = union(G, G*, E(V, V*)): the old
instances V, the new instances V* and an edge v -> v* whenever v*'s state depends on v's
(v ∈ T⁻¹(v*)). Control messages flow along G', so an instance completes only after every
instance it takes state from (Chi, Theorem 1). Here the instances are a stateful
operator's executors and the state is their bins, so E(V, V*) is read off two placements:
v -> v* carries the bins that go from v to v*.

Doubling every executor would be wasteful, so G' is pruned as in Chi:

- *State invariance*: an executor whose bin set does not change is one vertex (v = v*)
  with no state edge. It takes no part in the migration.
- *Acyclic invariance*: an executor whose bins do change is also collapsed to one vertex,
  as long as the graph stays acyclic. A cycle appears when executors hand bins round in a
  ring (a swap: A gives a bin to B and B gives one to A): collapsed, each would wait for
  the other. Such an executor keeps two vertices: v (its old role: gives bins away, and
  passes the bins it keeps to v*) and v* (its new role: receives). Old roles have no
  incoming edges and new roles no outgoing ones, so the result is a DAG whose topological
  order is a valid hand-over order: every executor releases a bin before its new owner
  loads it. Collapsing is greedy in executor order (finding the fewest split executors is
  the NP-hard feedback vertex set problem); only executors on a cycle are ever split.

Chi avoids cycles in scale-out/in by its allocation scheme (consistent hashing);
`assignments.rebalance_for_executors` has the same effect, since no executor both gives
and receives, so a rescale's meta-topology is fully collapsed. In Spark nothing is copied
between executors (a new owner reloads the bin from the checkpoint), so the meta-topology
is the explanation and verification order of a migration, shown by `swivel plan`.
"""

from __future__ import annotations

import enum
import graphlib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .assignments import Assignment, AssignmentError, bins_by_executor, validate_same_bins


class InstanceStatus(enum.StrEnum):
    UNCHANGED = "unchanged"  # same bins before and after: collapsed by state invariance
    CHANGED = "changed"  # in both graphs, gives and/or receives bins
    ADDED = "added"  # only in G*: a new executor
    REMOVED = "removed"  # only in G: a drained executor


class Side(enum.StrEnum):
    OLD = "old"  # v ∈ V
    NEW = "new"  # v* ∈ V*
    BOTH = "both"  # v and v* collapsed into one vertex


@dataclass(frozen=True, slots=True, order=True)
class Vertex:
    executor: str
    side: Side

    @property
    def label(self) -> str:
        """Chi's notation: `exec-1*` is the new instance, `exec-1` the old or collapsed one."""
        return f"{self.executor}*" if self.side is Side.NEW else self.executor


@dataclass(frozen=True)
class Instance:
    """One executor's part in the reconfiguration."""

    executor: str
    status: InstanceStatus
    bins_before: tuple[int, ...]
    bins_after: tuple[int, ...]
    gives_to: tuple[str, ...]
    receives_from: tuple[str, ...]
    vertices: tuple[Vertex, ...]

    @property
    def kept_bins(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.bins_before) & set(self.bins_after)))

    @property
    def collapsed(self) -> bool:
        return self.vertices == (Vertex(self.executor, Side.BOTH),)

    @property
    def splits(self) -> bool:
        """Its old state ends up on two or more executors (itself counted if it keeps some)."""
        return len(self.gives_to) + (1 if self.kept_bins else 0) >= 2

    @property
    def merges(self) -> bool:
        """Its new state comes from two or more executors (itself counted if it keeps some)."""
        return len(self.receives_from) + (1 if self.kept_bins else 0) >= 2


@dataclass(frozen=True, slots=True)
class StateEdge:
    """`target` takes `bins` from `source`. Between an executor's two vertices: kept bins."""

    source: Vertex
    target: Vertex
    bins: tuple[int, ...]

    @property
    def is_move(self) -> bool:
        return self.source.executor != self.target.executor


@dataclass(frozen=True)
class MetaTopology:
    """The pruned G': every executor once (or twice if split) and the state edges."""

    instances: tuple[Instance, ...]
    state_edges: tuple[StateEdge, ...]

    def instance(self, executor: str) -> Instance:
        for candidate in self.instances:
            if candidate.executor == executor:
                return candidate
        raise KeyError(executor)

    @property
    def vertices(self) -> tuple[Vertex, ...]:
        return tuple(sorted(v for instance in self.instances for v in instance.vertices))

    @property
    def participants(self) -> tuple[str, ...]:
        """Executors that take part: everything that state invariance did not prune."""
        return tuple(i.executor for i in self.instances if i.status is not InstanceStatus.UNCHANGED)

    @property
    def split_executors(self) -> tuple[str, ...]:
        """Executors kept as two vertices by acyclic invariance."""
        return tuple(
            i.executor
            for i in self.instances
            if i.status is InstanceStatus.CHANGED and not i.collapsed
        )

    def hand_over_order(self) -> tuple[Vertex, ...]:
        """A topological order of the participants' vertices: a bin's old owner comes
        before its new one. Unchanged executors are left out (nothing to hand over)."""
        pruned = [
            vertex
            for instance in self.instances
            if instance.status is not InstanceStatus.UNCHANGED
            for vertex in instance.vertices
        ]
        return _topological_order(self.state_edges, sorted(pruned))

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form for `swivel plan`."""
        return {
            "instances": [_instance_dict(i) for i in self.instances],
            "stateEdges": [
                {"from": e.source.label, "to": e.target.label, "bins": list(e.bins)}
                for e in self.state_edges
            ],
            "handOverOrder": [v.label for v in self.hand_over_order()],
        }


def plan_meta_topology(
    old: Assignment,
    new: Assignment,
    *,
    old_executors: Collection[str] | None = None,
    new_executors: Collection[str] | None = None,
) -> MetaTopology:
    """The pruned meta-topology from placement `old` to placement `new`.

    The executor sets default to the executors holding bins; pass them to include
    executors without bins (a fresh executor, or one being removed that holds nothing).
    """
    validate_same_bins(old, new)
    before_set = _executor_set(old, old_executors, "old_executors")
    after_set = _executor_set(new, new_executors, "new_executors")
    before = bins_by_executor(old, sorted(before_set))
    after = bins_by_executor(new, sorted(after_set))
    flows = _flows(old, new)
    split = _split_by_acyclic_invariance(flows, before_set & after_set, before, after)
    statuses = _statuses(before_set, after_set, before, after)
    instances = tuple(
        _instance(
            executor,
            status=statuses[executor],
            before=before,
            after=after,
            flows=flows,
            split=split,
        )
        for executor in sorted(before_set | after_set)
    )
    return MetaTopology(instances, _state_edges(flows, split, before, after))


def _executor_set(
    assignment: Assignment, declared: Collection[str] | None, field: str
) -> frozenset[str]:
    holding = frozenset(assignment.values())
    if declared is None:
        return holding
    unknown = sorted(holding - set(declared))
    if unknown:
        raise AssignmentError(field, f"executors {unknown} hold bins but are not listed")
    return frozenset(declared)


def _flows(old: Assignment, new: Assignment) -> dict[tuple[str, str], tuple[int, ...]]:
    """(giver, receiver) -> the bins that go from one to the other."""
    flows: dict[tuple[str, str], list[int]] = {}
    for bin_id in sorted(old):
        if old[bin_id] != new[bin_id]:
            flows.setdefault((old[bin_id], new[bin_id]), []).append(bin_id)
    return {pair: tuple(bins) for pair, bins in sorted(flows.items())}


def _statuses(
    before_set: frozenset[str],
    after_set: frozenset[str],
    before: Mapping[str, tuple[int, ...]],
    after: Mapping[str, tuple[int, ...]],
) -> dict[str, InstanceStatus]:
    statuses: dict[str, InstanceStatus] = {}
    for executor in before_set | after_set:
        if executor not in before_set:
            statuses[executor] = InstanceStatus.ADDED
        elif executor not in after_set:
            statuses[executor] = InstanceStatus.REMOVED
        elif before[executor] == after[executor]:
            statuses[executor] = InstanceStatus.UNCHANGED
        else:
            statuses[executor] = InstanceStatus.CHANGED
    return statuses


def _split_by_acyclic_invariance(
    flows: Mapping[tuple[str, str], tuple[int, ...]],
    survivors: frozenset[str],
    before: Mapping[str, tuple[int, ...]],
    after: Mapping[str, tuple[int, ...]],
) -> frozenset[str]:
    """Start from the unpruned G' (every changed survivor split) and collapse greedily."""
    split = frozenset(e for e in survivors if before[e] != after[e])
    for executor in sorted(split):
        trial = split - {executor}
        if _is_acyclic(_state_edges(flows, trial, before, after)):
            split = trial
    return split


def _state_edges(
    flows: Mapping[tuple[str, str], tuple[int, ...]],
    split: frozenset[str],
    before: Mapping[str, tuple[int, ...]],
    after: Mapping[str, tuple[int, ...]],
) -> tuple[StateEdge, ...]:
    def giver(executor: str) -> Vertex:
        return Vertex(executor, Side.OLD if _has_old_only(executor, split, after) else Side.BOTH)

    def receiver(executor: str) -> Vertex:
        return Vertex(executor, Side.NEW if _has_new_only(executor, split, before) else Side.BOTH)

    edges = [StateEdge(giver(s), receiver(t), bins) for (s, t), bins in flows.items()]
    for executor in sorted(split):
        kept = tuple(sorted(set(before[executor]) & set(after[executor])))
        if kept:
            edges.append(StateEdge(Vertex(executor, Side.OLD), Vertex(executor, Side.NEW), kept))
    return tuple(sorted(edges, key=lambda e: (e.source, e.target)))


def _has_old_only(executor: str, split: frozenset[str], after: Mapping[str, object]) -> bool:
    return executor in split or executor not in after


def _has_new_only(executor: str, split: frozenset[str], before: Mapping[str, object]) -> bool:
    return executor in split or executor not in before


def _vertices_of(
    executor: str, status: InstanceStatus, split: frozenset[str]
) -> tuple[Vertex, ...]:
    if status is InstanceStatus.ADDED:
        return (Vertex(executor, Side.NEW),)
    if status is InstanceStatus.REMOVED:
        return (Vertex(executor, Side.OLD),)
    if executor in split:
        return (Vertex(executor, Side.OLD), Vertex(executor, Side.NEW))
    return (Vertex(executor, Side.BOTH),)


def _instance(
    executor: str,
    *,
    status: InstanceStatus,
    before: Mapping[str, tuple[int, ...]],
    after: Mapping[str, tuple[int, ...]],
    flows: Mapping[tuple[str, str], tuple[int, ...]],
    split: frozenset[str],
) -> Instance:
    return Instance(
        executor=executor,
        status=status,
        bins_before=before.get(executor, ()),
        bins_after=after.get(executor, ()),
        gives_to=tuple(sorted({t for s, t in flows if s == executor})),
        receives_from=tuple(sorted({s for s, t in flows if t == executor})),
        vertices=_vertices_of(executor, status, split),
    )


def _graph(
    edges: Iterable[StateEdge], vertices: Iterable[Vertex]
) -> graphlib.TopologicalSorter[Vertex]:
    sorter: graphlib.TopologicalSorter[Vertex] = graphlib.TopologicalSorter()
    for vertex in vertices:
        sorter.add(vertex)
    for edge in edges:
        sorter.add(edge.target, edge.source)
    return sorter


def _is_acyclic(edges: Iterable[StateEdge]) -> bool:
    try:
        _graph(edges, ()).prepare()
    except graphlib.CycleError:
        return False
    return True


def _topological_order(
    edges: Iterable[StateEdge], vertices: Iterable[Vertex]
) -> tuple[Vertex, ...]:
    """Kahn's order with sorted ready sets, so the order is deterministic."""
    sorter = _graph(edges, vertices)
    sorter.prepare()
    order: list[Vertex] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready())
        order.extend(ready)
        sorter.done(*ready)
    return tuple(order)


def _instance_dict(instance: Instance) -> dict[str, Any]:
    return {
        "executor": instance.executor,
        "status": str(instance.status),
        "splits": instance.splits,
        "merges": instance.merges,
        "vertices": [v.label for v in instance.vertices],
        "binsBefore": list(instance.bins_before),
        "binsAfter": list(instance.bins_after),
        "givesTo": list(instance.gives_to),
        "receivesFrom": list(instance.receives_from),
    }
