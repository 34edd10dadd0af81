"""Chi's meta-topology over bin placements: G' with state- and acyclic-invariance pruning."""

from __future__ import annotations

import graphlib
import json
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from swivel.controllers.assignments import (
    AssignmentError,
    bins_by_executor,
    changed_bins,
    rebalance_for_executors,
)
from swivel.controllers.metatopology import (
    InstanceStatus,
    MetaTopology,
    Side,
    Vertex,
    plan_meta_topology,
)

NAMES = [f"exec-{i}" for i in range(6)]
LETTERS = string.ascii_lowercase  # bin i holds the words starting with LETTERS[i]


def letters(first: str, last: str) -> range:
    return range(LETTERS.index(first), LETTERS.index(last) + 1)


def placement(ranges: dict[str, tuple[str, str]]) -> dict[int, str]:
    return {b: owner for owner, (first, last) in ranges.items() for b in letters(first, last)}


def edges(meta: MetaTopology) -> dict[tuple[str, str], list[int]]:
    return {(e.source.label, e.target.label): list(e.bins) for e in meta.state_edges}


def assert_acyclic(meta: MetaTopology) -> None:
    sorter: graphlib.TopologicalSorter[Vertex] = graphlib.TopologicalSorter()
    for edge in meta.state_edges:
        sorter.add(edge.target, edge.source)
    sorter.prepare()  # raises CycleError on a cycle


# -- Chi §3 / §4.2.1: scale-out from two to three reducers ------------------------------------


def test_chi_scale_out_two_to_three_reducers() -> None:
    """Chi's word count (Fig. 2, Fig. 3a), reconstructed with one bin per initial letter
    (26 bins, 'a' = bin 0). Before: R1 counts [a-l], R2 [m-z]. Steps (IV)-(V) say R1 ships
    [i-l] and R2 ships [m-p] to the new R3, which merges them into [i-p]; so after: R1 [a-h],
    R3 [i-p], R2 [q-z]. The mappers M1, M2 hold no reducer bins: listed in both executor
    sets, they collapse by state invariance (M1* with M1). R1 and R2 change state but
    collapse with R1*, R2* by acyclic invariance; the result is Stage (IV) of Fig. 2.
    """
    old = placement({"R1": ("a", "l"), "R2": ("m", "z")})
    new = placement({"R1": ("a", "h"), "R3": ("i", "p"), "R2": ("q", "z")})
    meta = plan_meta_topology(
        old,
        new,
        old_executors={"M1", "M2", "R1", "R2"},
        new_executors={"M1", "M2", "R1", "R2", "R3"},
    )
    assert edges(meta) == {
        ("R1", "R3*"): list(letters("i", "l")),
        ("R2", "R3*"): list(letters("m", "p")),
    }
    m1, r1, r2, r3 = (meta.instance(e) for e in ("M1", "R1", "R2", "R3"))
    assert m1.status is InstanceStatus.UNCHANGED and m1.collapsed
    assert r1.status is InstanceStatus.CHANGED and r1.collapsed and r1.splits and not r1.merges
    assert r2.splits and r2.gives_to == ("R3",)
    assert r3.status is InstanceStatus.ADDED and r3.merges and r3.receives_from == ("R1", "R2")
    assert meta.participants == ("R1", "R2", "R3")
    assert meta.split_executors == ()
    assert [v.label for v in meta.hand_over_order()] == ["R1", "R2", "R3*"]


def test_chi_scale_out_as_worded_in_step_two_is_a_chain() -> None:
    """Step (II) words the new ranges differently: R2 [i-p], R3 [q-z]. Then R1 gives [i-l]
    to R2 and R2 gives [q-z] to R3: R2 both receives and gives, still acyclic, no split."""
    old = placement({"R1": ("a", "l"), "R2": ("m", "z")})
    new = placement({"R1": ("a", "h"), "R2": ("i", "p"), "R3": ("q", "z")})
    meta = plan_meta_topology(old, new)
    assert edges(meta) == {
        ("R1", "R2"): list(letters("i", "l")),
        ("R2", "R3*"): list(letters("q", "z")),
    }
    assert meta.instance("R2").merges and meta.instance("R2").splits
    assert meta.split_executors == ()
    assert [v.label for v in meta.hand_over_order()] == ["R1", "R2", "R3*"]


# -- pruning ----------------------------------------------------------------------------------


def test_a_swap_would_be_a_cycle_so_one_executor_keeps_two_vertices() -> None:
    old = {0: "A", 1: "B", 2: "A", 3: "B"}
    new = {0: "B", 1: "A", 2: "A", 3: "B"}
    meta = plan_meta_topology(old, new)
    assert meta.split_executors == ("B",)  # greedy in executor order: A collapses first
    assert meta.instance("B").vertices == (Vertex("B", Side.OLD), Vertex("B", Side.NEW))
    assert edges(meta) == {("A", "B*"): [0], ("B", "A"): [1], ("B", "B*"): [3]}
    assert [v.label for v in meta.hand_over_order()] == ["B", "A", "B*"]
    assert_acyclic(meta)


def test_a_ring_of_three_needs_only_one_split() -> None:
    old = {0: "A", 1: "B", 2: "C"}
    new = {0: "B", 1: "C", 2: "A"}
    meta = plan_meta_topology(old, new)
    assert meta.split_executors == ("C",)
    assert ("C", "C*") not in edges(meta)  # C keeps nothing: no edge between its vertices
    assert_acyclic(meta)


def test_unchanged_executors_are_pruned_by_state_invariance() -> None:
    old = {0: "A", 1: "A", 2: "B", 3: "C"}
    new = {0: "A", 1: "A", 2: "C", 3: "B"}
    meta = plan_meta_topology(old, new)
    a = meta.instance("A")
    assert a.status is InstanceStatus.UNCHANGED and a.collapsed
    assert not a.splits and not a.merges and a.kept_bins == (0, 1)
    assert meta.participants == ("B", "C")
    assert all("A" not in (e.source.executor, e.target.executor) for e in meta.state_edges)


def test_drained_executor_is_removed_and_only_gives() -> None:
    old = rebalance_for_executors({b: "exec-0" for b in range(12)}, NAMES[:4])
    new = rebalance_for_executors(old, NAMES[:3])
    meta = plan_meta_topology(old, new)
    drained = meta.instance("exec-3")
    assert drained.status is InstanceStatus.REMOVED
    assert drained.vertices == (Vertex("exec-3", Side.OLD),)
    assert drained.splits and drained.bins_after == ()
    assert meta.participants == ("exec-0", "exec-1", "exec-2", "exec-3")


def test_fresh_executor_without_bins_is_added_but_has_no_state_edge() -> None:
    old = {0: "A", 1: "B"}
    meta = plan_meta_topology(old, old, new_executors={"A", "B", "C"})
    assert meta.instance("C").status is InstanceStatus.ADDED
    assert meta.state_edges == () and meta.participants == ("C",)


def test_executor_sets_must_include_every_holder() -> None:
    with pytest.raises(AssignmentError) as caught:
        plan_meta_topology({0: "A", 1: "B"}, {0: "A", 1: "A"}, old_executors={"A"})
    assert caught.value.field == "old_executors"
    assert "['B']" in caught.value.reason


def test_to_dict_is_json_friendly() -> None:
    old = {0: "A", 1: "B", 2: "A", 3: "B"}
    new = {0: "B", 1: "A", 2: "A", 3: "B"}
    data = plan_meta_topology(old, new).to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["stateEdges"][0] == {"from": "A", "to": "B*", "bins": [0]}
    assert data["handOverOrder"] == ["B", "A", "B*"]
    b = next(i for i in data["instances"] if i["executor"] == "B")
    assert b["vertices"] == ["B", "B*"] and b["status"] == "changed"


# -- properties --------------------------------------------------------------------------------


@st.composite
def placement_changes(draw: st.DrawFn) -> tuple[dict[int, str], dict[int, str]]:
    bins = draw(st.integers(min_value=1, max_value=32))
    before = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=True))
    after = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=True))
    old = {b: draw(st.sampled_from(before)) for b in range(bins)}
    return old, {b: draw(st.sampled_from(after)) for b in range(bins)}


@given(placement_changes())
def test_pruning_leaves_only_executors_that_change(change) -> None:
    old, new = change
    meta = plan_meta_topology(old, new)
    before, after = bins_by_executor(old), bins_by_executor(new)
    changing = {e for e in before.keys() | after.keys() if before.get(e) != after.get(e)}
    assert set(meta.participants) == changing
    touched = {v.executor for e in meta.state_edges for v in (e.source, e.target)}
    assert touched <= changing
    for instance in meta.instances:
        assert (instance.status is InstanceStatus.UNCHANGED) == (instance.executor not in changing)


@given(placement_changes())
def test_meta_topology_is_a_dag_whose_moves_carry_exactly_the_changed_bins(change) -> None:
    old, new = change
    meta = plan_meta_topology(old, new)
    assert_acyclic(meta)
    moved = sorted(b for e in meta.state_edges if e.is_move for b in e.bins)
    assert moved == list(changed_bins(old, new))
    for edge in meta.state_edges:
        assert all(
            old[b] == edge.source.executor and new[b] == edge.target.executor for b in edge.bins
        )
    order = meta.hand_over_order()
    position = {v: i for i, v in enumerate(order)}
    assert all(position[e.source] < position[e.target] for e in meta.state_edges)


def has_cycle(old: dict[int, str], new: dict[int, str], split: set[str]) -> bool:
    """Oracle: the executor graph with the `split` executors as two vertices has a cycle."""
    sorter: graphlib.TopologicalSorter[tuple[str, str]] = graphlib.TopologicalSorter()
    for b in changed_bins(old, new):
        giver = (old[b], "old" if old[b] in split else "both")
        receiver = (new[b], "new" if new[b] in split else "both")
        sorter.add(receiver, giver)
    try:
        sorter.prepare()
    except graphlib.CycleError:
        return True
    return False


@given(placement_changes())
def test_acyclic_invariance_splits_only_where_a_cycle_forces_it(change) -> None:
    old, new = change
    meta = plan_meta_topology(old, new)
    split = set(meta.split_executors)
    assert not has_cycle(old, new, split)
    for executor in split:  # maximal: collapsing any split executor would close a cycle
        assert has_cycle(old, new, split - {executor})
    if not has_cycle(old, new, set()):
        assert not split  # no ring of hand-overs at all: everything collapses


@given(placement_changes(), st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=True))
def test_rescale_targets_collapse_fully(change, executors) -> None:
    """Chi keeps scale-out/in acyclic by its allocation scheme; the rebalance does too."""
    old, _ = change
    meta = plan_meta_topology(old, rebalance_for_executors(old, executors))
    assert meta.split_executors == ()
