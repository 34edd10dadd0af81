"""Which operators seed the Fries MCS: the targets and the one-to-many ancestors that must
synchronise with them (Alg. 3), minus those the pruning rules show harmless (Alg. 4).

Why the seeds are what they are. Inside a component a tuple inherits its version from
its parent when it arrives over a component edge; a tuple arriving at a head, or over an
edge from outside, gets whatever version its operator has at that moment. So a source
record's transaction is consistent exactly when all its tuples that reach targets trace
back, over component edges, to one and the same tuple. Two target tuples that do not are
split apart at some one-to-many operator M with at least one branch leaving the MCS, so M
is outside the MCS. M can *split a record towards two target operations* when one input
tuple of M has two branches, paths P1 to target R1 and P2 to target R2 (R1 = R2 and even
P1 = P2 allowed), such that (a) if M emits at most one tuple per out-edge, P1 and P2 leave
M by different out-edges, and (b) no uniqueness operator emits on both branches (it emits
at most one tuple per record). A one-to-many operator that cannot is *harmless*; the
plan is conflict-serializable when every one-to-many operator outside the MCS that leads
to a target is harmless. Each pruning rule proves its operator harmless:

- edge-wise one-to-one (§6.3 rule 1, as the paper states it): M emits at most one tuple
  per out-edge and only one of its out-edges leads to any target (that edge then leads to
  R). Condition (a) cannot hold. The rule looks at all targets, not only R, which is what
  keeps Fig. 9 (II) from being pruned.
- uniqueness (§6.3 rule 2, strengthened): one uniqueness operator U, not itself a target,
  lies on every path from M to every target downstream of M (U may be M). Every branch
  passes U, so (b) forbids two. A U that copies its one tuple down several out-edges (a
  fan-out, a broadcast into several workers) is no gate: the copies are a split of their
  own, and a U pruning M would then have to head them while receiving M's several tuples
  of one record, against Lemma 6.3. The paper asks only that each path from M to R pass *some*
  uniqueness operator; that is unsound twice over. With M -> U1 -> R and M -> U2 -> R, R
  receives one tuple through each, possibly under different versions. With M -> U1 -> R1
  and M -> U2 -> R2 for targets R1 and R2, one record reaches both while R1 and R2 sit in
  different components. On the paper's own examples (Fig. 10, Table 6) both rules agree.

The seeds are the targets plus every one-to-many ancestor of a target that is not pruned
while all its one-to-many ancestors are: Alg. 3's "earliest" taken over the unpruned
operators. Without pruning that is the paper's definition: one-to-many ancestors with no
one-to-many ancestor at all, the only ones sure to receive one tuple per record (Lemma
6.3). A pruned ancestor thus exposes the one-to-many operators below it, which are judged
in turn. It suffices: a one-to-many ancestor M of a target that is not pruned has, among
its unpruned one-to-many ancestors-or-self, one with none above it; that one is a seed, so
M lies on a path between seeds and inside the MCS. A head also still receives at most one
tuple per record that reaches a target: two would need a split at a pruned M above the
head with both branches going on to a target, which the edge-wise rule forbids outright
and the uniqueness rule forbids unless its U lies on every path from the head to a target,
and then the head is pruned itself (or, being a target, impossible).

The paper applies the rules per (ancestor, target) pair. As guarded, both depend on the
ancestor and on the whole set of targets, not on which downstream target is asked about,
so every pair with the same ancestor gets the same answer and the code asks once per
ancestor. That makes the union of the per-target seed sets one forward pass: no
per-target ancestor walk, O(V + E). The uniqueness rule needs, for
each operator, the nearest uniqueness operator on all its paths to targets, a
post-dominator question answered in one reverse pass: an operator's qualifying uniqueness
operators form a chain, and a non-target's chain is the meet of its children's, found by
walking up the chains, O(D) per edge for D uniqueness operators in a row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from .graph import Dataflow, fan_out_flags

EDGE_WISE_ONE_TO_ONE: Final = "edge-wise-one-to-one"
UNIQUENESS: Final = "uniqueness"

_NONE: Final = -1  # "no operator" in position-indexed lists


@dataclass(frozen=True, slots=True)
class IndexedDataflow:
    """A dataflow by topological position: lists beat name lookups in the hot loops."""

    names: tuple[str, ...]  # topological order; an operator's position is its index
    position: Mapping[str, int]
    children: tuple[tuple[int, ...], ...]
    parents: tuple[tuple[int, ...], ...]
    # The flags the rules read, by position (fan-outs resolved when asked for).
    one_to_many: tuple[bool, ...]
    per_edge: tuple[bool, ...]  # at most one tuple per out-edge
    unique: tuple[bool, ...]
    # A uniqueness operator that sends each output tuple down several out-edges, or as
    # several copies down one (a fan-out, a broadcast into several workers): no gate.
    copies: tuple[bool, ...]


def index_dataflow(
    dataflow: Dataflow, *, cut_blocking: bool, fan_outs: bool = False
) -> IndexedDataflow:
    """Index `dataflow`; with `cut_blocking`, drop every out-edge of a blocking operator;
    with `fan_outs`, resolve the operators' cardinality first (`graph.resolve_fan_outs`).

    Those are the edges §7.1 cuts: the operator ends the pipelined region of its inputs and
    its children begin a new one. Children come out in ascending position (they are filled
    in topological order), so edge lists built from them need no sorting.
    """
    names = dataflow.topological_order
    position = {name: index for index, name in enumerate(names)}
    by_name = dataflow.by_name
    operators = [by_name[name] for name in names]
    if fan_outs:
        flags = [fan_out_flags(dataflow, op) for op in operators]
    else:
        flags = [(op.one_to_many, op.at_most_one_per_edge, op.blocking) for op in operators]
    cut = [cut_blocking and blocking for _, _, blocking in flags]
    parents_by_name = dataflow.parents
    children: list[list[int]] = [[] for _ in names]
    parents: list[tuple[int, ...]] = []
    for v, name in enumerate(names):
        mine = tuple(p for p in map(position.__getitem__, parents_by_name[name]) if not cut[p])
        parents.append(mine)
        for p in mine:
            children[p].append(v)
    unique = tuple(op.unique_per_record for op in operators)
    return IndexedDataflow(
        names=names,
        position=position,
        children=tuple(map(tuple, children)),
        parents=tuple(parents),
        one_to_many=tuple(many for many, _, _ in flags),
        per_edge=tuple(per_edge for _, per_edge, _ in flags),
        unique=unique,
        # Only a uniqueness operator's copies matter (`_uniqueness_gates`).
        copies=tuple(u and dataflow.copies_output(n) for u, n in zip(unique, names, strict=True)),
    )


@dataclass(frozen=True, slots=True)
class SeedSelection:
    """What `select_seeds` decided, by topological position."""

    seeds: frozenset[int]
    pruned: Mapping[int, str]  # considered ancestor -> the rule that pruned it
    # Ancestor-or-self of a target; also Alg. 1's blue marking, as every seed leads to one.
    feeds_target: tuple[bool, ...]


def select_seeds(
    graph: IndexedDataflow, targets: frozenset[int], *, pruning: bool
) -> SeedSelection:
    """Targets plus the one-to-many ancestors that must synchronise (see the module doc)."""
    feeds = _feeds_target(graph, targets)
    rules = _pruning_rules(graph, targets, feeds) if pruning else {}
    seeds = set(targets)
    pruned: dict[int, str] = {}
    # below_kept[v]: v has a one-to-many ancestor that is kept, so v is not "earliest".
    # Filled forwards (push to children), so it is final when v's turn comes.
    below_kept = [False] * len(graph.names)
    for v, one_to_many in enumerate(graph.one_to_many):
        if not feeds[v]:
            continue  # every parent of an operator that feeds a target feeds one too
        kept = one_to_many and v not in rules
        if below_kept[v] or kept:
            for c in graph.children[v]:
                below_kept[c] = True
        if below_kept[v] or not one_to_many:
            continue
        if kept:
            seeds.add(v)
        elif v not in targets:
            pruned[v] = rules[v]
    return SeedSelection(frozenset(seeds), pruned, tuple(feeds))


def _feeds_target(graph: IndexedDataflow, targets: frozenset[int]) -> list[bool]:
    """Ancestor-or-self of a target, pushed from each operator to its parents."""
    feeds = [False] * len(graph.names)
    for t in targets:
        feeds[t] = True
    parents = graph.parents
    for v in reversed(range(len(feeds))):
        if feeds[v]:
            for p in parents[v]:
                feeds[p] = True
    return feeds


def _pruning_rules(
    graph: IndexedDataflow, targets: frozenset[int], feeds: Sequence[bool]
) -> dict[int, str]:
    """The rule that proves each one-to-many operator leading to a target harmless, if any."""
    gates = _uniqueness_gates(graph, targets, feeds)
    rules: dict[int, str] = {}
    for v, one_to_many in enumerate(graph.one_to_many):
        if not (feeds[v] and one_to_many):
            continue
        if graph.per_edge[v] and sum(feeds[c] for c in graph.children[v]) == 1:
            rules[v] = EDGE_WISE_ONE_TO_ONE
        elif gates[v] != _NONE:
            rules[v] = UNIQUENESS
    return rules


def _uniqueness_gates(
    graph: IndexedDataflow, targets: frozenset[int], feeds: Sequence[bool]
) -> list[int]:
    """For each operator v, the nearest uniqueness operator U (not a target, not copying
    its output down several edges, maybe v) on every path from v to every target it
    reaches; `_NONE` when there is none.

    The qualifying operators of v form a chain (U, then U's own gate, ...). A target's chain
    is empty: the path that ends at it has nothing after it. A non-target's chain is the
    common part of its children's chains, found as a lowest common ancestor in the forest
    `up` that links each uniqueness operator to its own gate.
    """
    count = len(graph.names)
    gate = [_NONE] * count
    eligible = [
        unique and feeds[v] and v not in targets and not graph.copies[v]
        for v, unique in enumerate(graph.unique)
    ]
    if not any(eligible):
        return gate
    up = [_NONE] * count
    depth = [0] * count

    def meet(a: int, b: int) -> int:
        while a != b:
            if _NONE in (a, b):
                return _NONE
            if depth[a] >= depth[b]:
                a = up[a]
            else:
                b = up[b]
        return a

    for v in reversed(range(count)):
        if not feeds[v]:
            continue
        beyond = _NONE
        if v not in targets:
            fed = [gate[c] for c in graph.children[v] if feeds[c]]
            beyond = fed[0]
            for other in fed[1:]:
                beyond = meet(beyond, other)
        if eligible[v]:
            gate[v], up[v] = v, beyond
            depth[v] = 1 if beyond == _NONE else depth[beyond] + 1
        else:
            gate[v] = beyond
    return gate
