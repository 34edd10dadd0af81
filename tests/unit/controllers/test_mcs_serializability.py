"""Fries MCS plans are conflict-serializable: a brute-force oracle (path enumeration) and
the cases where §6.3's rules, read literally, would not be.

The oracle: a plan is safe when no one-to-many operator outside the MCS can send one
source record to two target operations (two branches from one input tuple: distinct
first hops if it emits one tuple per edge, no uniqueness operator emitting on both), and
no head can receive two tuples of one record (Lemma 6.3). `seeding.py` explains why.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable

from hypothesis import given, settings
from hypothesis import strategies as st

from swivel.api.vocabulary import Partitioning
from swivel.controllers.graph import Dataflow, Edge, Operator, resolve_fan_outs
from swivel.controllers.mcs import (
    EDGE_WISE_ONE_TO_ONE,
    UNIQUENESS,
    McsPlan,
    minimal_covering_subdag,
    plan_mcs,
)
from tests.unit.controllers.mcs_building import (
    blocking,
    chain,
    components,
    one_to_many,
    replicate,
    split,
    unique,
)

# --- where the rules needed a guard to stay serializable ---------------------------------


def test_uniqueness_needs_one_operator_on_every_path_not_one_per_path() -> None:
    """§6.3 prunes M when each path to R passes *a* uniqueness operator. With two of them
    on two branches R receives one tuple from each, possibly under two versions, so M is
    kept; the brute-force oracle confirms the literal rule's plan would be unsafe."""
    dataflow = Dataflow.of(
        ["source", one_to_many("M"), unique("U1"), unique("U2"), "R"],
        [*chain("source", "M", "U1", "R"), *chain("M", "U2", "R")],
    )
    plan = plan_mcs(dataflow, ["R"])
    assert plan.pruned == {}
    assert components(plan) == [{"M", "U1", "U2", "R"}]
    literal_mcs, _ = minimal_covering_subdag(dataflow, ["R"])
    assert unsafe_splitters(dataflow, {"R"}, literal_mcs) == {"M"}
    assert unsafe_splitters(dataflow, {"R"}, plan.operators) == set()


def test_uniqueness_must_hold_for_every_target_downstream() -> None:
    """One record reaches both X and R (through U1 and U2); pruning RE for each target on
    its own would put them in separate components. RE stays."""
    dataflow = Dataflow.of(
        ["source", replicate("RE"), unique("U1"), unique("U2"), "X", "R"],
        [*chain("source", "RE", "U1", "X"), *chain("RE", "U2", "R")],
    )
    plan = plan_mcs(dataflow, ["X", "R"])
    assert components(plan) == [{"RE", "U1", "U2", "X", "R"}]
    literal, _ = minimal_covering_subdag(dataflow, ["X", "R"])
    assert unsafe_splitters(dataflow, {"X", "R"}, literal) == {"RE"}


def test_a_shared_uniqueness_operator_prunes_for_several_targets() -> None:
    dataflow = Dataflow.of(
        ["source", one_to_many("M"), "a", "b", unique("SJ"), split("split"), "X", "R"],
        [
            *chain("source", "M", "a", "SJ", "split", "X"),
            *chain("M", "b", "SJ"),
            ("split", "R"),
        ],
    )
    plan = plan_mcs(dataflow, ["X", "R"])
    assert plan.pruned == {"M": UNIQUENESS}
    assert components(plan) == [{"X"}, {"R"}]


def test_a_uniqueness_operator_that_is_a_target_does_not_shield_itself() -> None:
    """U receives every copy M makes, so U (a target) must synchronise with M."""
    dataflow = Dataflow.of(
        ["source", one_to_many("M"), unique("U"), "R"], chain("source", "M", "U", "R")
    )
    plan = plan_mcs(dataflow, ["U", "R"])
    assert components(plan) == [{"M", "U", "R"}]
    assert plan.pruned == {}
    assert components(plan_mcs(dataflow, ["R"])) == [{"R"}]


def test_the_oracle_catches_the_plan_that_reads_cardinality_off_the_kinds_only() -> None:
    """Issue 10: parse -> {s1, s2} -> u -> det. Planned as if parse were one-to-one (the
    flags taken as given, as before Def. 5.2 was applied to fan-outs), s1 and s2 head the
    component and one payment's two copies can reach det under two versions."""
    operators = [Operator(n) for n in ("payments", "parse", "s1", "s2", "u", "det")]
    edges = (
        Edge("payments", "parse"),
        Edge("parse", "s1"),
        Edge("parse", "s2"),
        Edge("s1", "u"),
        Edge("s2", "u"),
        Edge("u", "det"),
    )
    targets = {"s1", "s2", "det"}
    kinds_only = plan_mcs(Dataflow(tuple(operators), edges, fan_outs_resolved=True), targets)
    dataflow = Dataflow(tuple(operators), edges)
    assert kinds_only.components[0].heads == ("s1", "s2")
    assert unsafe_splitters(dataflow, targets, kinds_only.operators) == {"parse"}
    plan = plan_mcs(dataflow, targets)
    assert plan.components[0].heads == ("parse",)
    assert unsafe_splitters(dataflow, targets, plan.operators) == set()
    assert heads_fed_twice(dataflow, plan) == set()


# --- brute-force oracle ------------------------------------------------------------------
#
# The oracle reads what each operator does with one input tuple, independently of the
# planner's `resolve_fan_outs`: a fan-out copies each output tuple down every out-edge
# (a Split sends it down one), a broadcast edge into a consumer with several workers
# carries a copy per worker, a flatten may put several tuples on one edge, a uniqueness
# operator emits for at most one tuple of a record, and a blocking operator ends the
# transactions it consumes while each record it emits starts a fresh one.


def pipelined_children(dataflow: Dataflow) -> dict[str, list[str]]:
    """Children with the out-edges of blocking operators removed (§7.1's cut)."""
    children: dict[str, list[str]] = {op.name: [] for op in dataflow.operators}
    for edge in dataflow.edges:
        if not dataflow.by_name[edge.source].blocking:
            children[edge.source].append(edge.target)
    return children


def planner_children(dataflow: Dataflow) -> dict[str, list[str]]:
    """The graph `plan_mcs` covers: §7.1's cut after the fan-outs are resolved."""
    return pipelined_children(resolve_fan_outs(dataflow))


def paths(children: dict[str, list[str]], start: str, end: str) -> list[tuple[str, ...]]:
    if start == end:
        return [(start,)]
    return [(start, *rest) for c in children[start] for rest in paths(children, c, end)]


def reach(children: dict[str, list[str]], start: str) -> set[str]:
    seen, stack = {start}, [start]
    while stack:
        for c in children[stack.pop()]:
            if c not in seen:
                seen.add(c)
                stack.append(c)
    return seen


def covering_by_enumeration(
    children: dict[str, list[str]], seeds: Iterable[str]
) -> tuple[set[str], set[tuple[str, str]]]:
    """Def. 5.4 read literally: the union of all paths between two seeds."""
    vertices: set[str] = set()
    edges: set[tuple[str, str]] = set()
    for a, b in itertools.product(seeds, repeat=2):
        for path in paths(children, a, b):
            vertices.update(path)
            edges.update(itertools.pairwise(path))
    return vertices, edges


def first_hops_may_differ(dataflow: Dataflow, splitter: str) -> bool:
    """Can one input tuple of `splitter` put tuples on two different out-edges?"""
    op = dataflow.by_name[splitter]
    return not op.routes or (op.one_to_many and not op.blocking and not op.unique_per_record)


def several_on_edge(dataflow: Dataflow, edge: Edge) -> bool:
    """Can one input tuple of the edge's source put two tuples on this one edge?"""
    op = dataflow.by_name[edge.source]
    if (
        edge.partitioning is Partitioning.BROADCAST
        and dataflow.by_name[edge.target].parallelism > 1
    ):
        return True  # a copy for each worker of the consumer
    return (
        op.one_to_many and not op.at_most_one_per_edge and not op.blocking
    ) and not op.unique_per_record


def branch_pairs(
    dataflow: Dataflow, children: dict[str, list[str]], splitter: str, ends: Iterable[str]
) -> Iterable[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Pairs of branches one input tuple of `splitter` (or, for a blocking operator, one
    record it emits) can start, each ending at one of `ends`: they leave by two out-edges
    the splitter may both emit on, or twice by one edge that can carry two tuples, and no
    uniqueness operator emits on both (it emits once per record). The first hop is over
    any out-edge, the rest over `children` (a transaction ends at a blocking operator)."""
    edges = dataflow.out_edges[splitter]
    branches = [
        (edge, (splitter, *p))
        for edge in edges
        for end in ends
        if end != splitter
        for p in paths(children, edge.target, end)
    ]
    for (e1, first), (e2, second) in itertools.product(branches, repeat=2):
        if e1 == e2 and not several_on_edge(dataflow, e1):
            continue
        if e1 != e2 and not first_hops_may_differ(dataflow, splitter):
            continue
        emitting = [
            {v for v in b[1:-1] if dataflow.by_name[v].unique_per_record} for b in (first, second)
        ]
        if not emitting[0] & emitting[1]:
            yield first, second


def unsafe_splitters(dataflow: Dataflow, targets: set[str], mcs: Iterable[str]) -> set[str]:
    """Operators outside the MCS that can send one record to two target operations: each
    such split can give one transaction two versions."""
    inside = set(mcs)
    children = pipelined_children(dataflow)
    return {
        op.name
        for op in dataflow.operators
        if op.name not in inside and any(branch_pairs(dataflow, children, op.name, targets))
    }


def heads_fed_twice(dataflow: Dataflow, plan: McsPlan) -> set[str]:
    """Heads that can receive two tuples of one record (Lemma 6.3 says none may)."""
    children = pipelined_children(dataflow)
    return {
        head
        for component in plan.components
        for head in component.heads
        for op in dataflow.operators
        if any(branch_pairs(dataflow, children, op.name, [head]))
    }


# --- properties on random DAGs -----------------------------------------------------------


# Operator kinds, weighted towards the ones the rules are about.
KINDS = {
    "map": Operator("_"),
    "replicate": replicate("_"),
    "flatten": one_to_many("_"),
    "self-join": unique("_"),
    "unique flatten": one_to_many("_", unique_per_record=True),
    "aggregate": blocking("_"),
    "blocking flatten": one_to_many("_", blocking=True),
    "split": split("_"),
}
KIND_WEIGHTS = ["map"] * 3 + ["replicate"] * 2 + ["flatten"] * 2 + ["self-join"] * 2 + list(KINDS)


@st.composite
def dataflows(draw: st.DrawFn, max_operators: int = 9) -> Dataflow:
    """Random DAGs (in-degree <= 3, so fan-outs and merges) with random kinds of operator
    and one or two workers, some edges broadcast, listed in a random order so that the
    topological order is not the listing order."""
    count = draw(st.integers(1, max_operators))
    operators = [
        dataclasses.replace(
            KINDS[draw(st.sampled_from(KIND_WEIGHTS))],
            name=f"op{index}",
            parallelism=draw(st.sampled_from([1, 1, 2])),
        )
        for index in range(count)
    ]
    partitionings = [Partitioning.FORWARD] * 4 + [Partitioning.BROADCAST]
    edges = [
        Edge(f"op{parent}", f"op{index}", draw(st.sampled_from(partitionings)))
        for index in range(1, count)
        for parent in sorted(draw(st.sets(st.integers(0, index - 1), max_size=3)))
    ]
    order = draw(st.permutations(operators))
    return Dataflow.of(order, edges)


@st.composite
def planning_cases(draw: st.DrawFn, max_operators: int = 9) -> tuple[Dataflow, list[str]]:
    dataflow = draw(dataflows(max_operators))
    names = [op.name for op in dataflow.operators]
    targets = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3))
    return dataflow, targets


PROPERTY_SETTINGS = settings(max_examples=150, deadline=None)


@PROPERTY_SETTINGS
@given(dataflows(), st.data())
def test_alg1_matches_the_definition_by_path_enumeration(
    dataflow: Dataflow, data: st.DataObject
) -> None:
    seeds = data.draw(st.sets(st.sampled_from([op.name for op in dataflow.operators])))
    children = {name: list(cs) for name, cs in dataflow.children.items()}
    assert minimal_covering_subdag(dataflow, seeds) == tuple(
        map(frozenset, covering_by_enumeration(children, seeds))
    )


@PROPERTY_SETTINGS
@given(planning_cases())
def test_plan_is_the_covering_subdag_of_its_seeds(case: tuple[Dataflow, list[str]]) -> None:
    """Every path between two seeds is inside, every vertex inside is on such a path."""
    dataflow, targets = case
    for pruning in (True, False):
        plan = plan_mcs(dataflow, targets, pruning=pruning)
        vertices, edges = covering_by_enumeration(planner_children(dataflow), plan.seeds)
        assert (plan.operators, plan.edges) == (vertices, edges)
        assert set(plan.targets) == set(targets) <= set(plan.seeds)


@PROPERTY_SETTINGS
@given(planning_cases())
def test_components_are_disjoint_connected_and_hold_a_target(
    case: tuple[Dataflow, list[str]],
) -> None:
    dataflow, targets = case
    order = dataflow.topological_order
    for pruning in (True, False):
        plan = plan_mcs(dataflow, targets, pruning=pruning)
        seen: set[str] = set()
        for component in plan.components:
            members = set(component.operators)
            assert not members & seen
            seen |= members
            assert component.targets and set(component.targets) <= set(targets)
            assert list(component.operators) == sorted(members, key=order.index)
            assert {s for s, t in component.edges} | {t for s, t in component.edges} <= members
            assert set(component.heads) == members - {t for _, t in component.edges}
            undirected = {m: set[str]() for m in members}
            for s, t in component.edges:
                undirected[s].add(t)
                undirected[t].add(s)
            assert (
                reach({m: list(n) for m, n in undirected.items()}, component.operators[0])
                == members
            )
        firsts = [order.index(c.operators[0]) for c in plan.components]
        assert firsts == sorted(firsts)


@PROPERTY_SETTINGS
@given(planning_cases())
def test_plans_are_conflict_serializable(case: tuple[Dataflow, list[str]]) -> None:
    """No one-to-many operator outside the MCS can split a record towards two target
    operations, and no head can receive two tuples of one record (Lemma 6.3)."""
    dataflow, targets = case
    for pruning in (True, False):
        plan = plan_mcs(dataflow, targets, pruning=pruning)
        assert unsafe_splitters(dataflow, set(targets), plan.operators) == set()
        assert heads_fed_twice(dataflow, plan) == set()


@PROPERTY_SETTINGS
@given(planning_cases())
def test_seeds_follow_alg3_and_pruning_only_shrinks(case: tuple[Dataflow, list[str]]) -> None:
    dataflow, targets = case
    children = planner_children(dataflow)
    resolved = resolve_fan_outs(dataflow)
    ancestors = {op.name: set[str]() for op in dataflow.operators}
    for name in ancestors:
        for descendant in reach(children, name) - {name}:
            ancestors[descendant].add(name)
    many = {op.name for op in resolved.operators if op.one_to_many}
    earliest = {a for t in targets for a in ancestors[t] & many if not ancestors[a] & many}
    unpruned = plan_mcs(dataflow, targets, pruning=False)
    assert set(unpruned.seeds) == set(targets) | earliest
    assert unpruned.pruned == {}
    pruned = plan_mcs(dataflow, targets)
    assert pruned.operators <= unpruned.operators
    assert pruned.edges <= unpruned.edges
    considered = set().union(*(ancestors[t] for t in targets)) & many
    assert set(pruned.seeds) <= set(targets) | considered
    assert set(pruned.pruned) <= considered - set(pruned.seeds) - set(targets)
    assert set(pruned.pruned.values()) <= {EDGE_WISE_ONE_TO_ONE, UNIQUENESS}


@settings(max_examples=60, deadline=None)
@given(planning_cases(max_operators=30))
def test_plans_are_deterministic(case: tuple[Dataflow, list[str]]) -> None:
    dataflow, targets = case
    rebuilt = Dataflow(dataflow.operators, dataflow.edges)
    for pruning in (True, False):
        assert plan_mcs(dataflow, targets, pruning=pruning) == plan_mcs(
            rebuilt, list(reversed(targets)), pruning=pruning
        )
