"""Fries MCS planner: the paper's worked examples (Figs. 2, 5-10, Tables 4-6), nested
one-to-many ancestors, blocking operators and the API. The brute-force oracle, the cases
where the pruning rules needed a guard, and the random-DAG properties are in
`test_mcs_serializability.py`.

The paper's figures are missing from our copy; each dataflow below is reconstructed from
the text and the tables, and its docstring says how.
"""

from __future__ import annotations

import pytest

from swivel.api.vocabulary import Partitioning
from swivel.controllers.graph import Dataflow, Edge, GraphError, Operator
from swivel.controllers.mcs import (
    EDGE_WISE_ONE_TO_ONE,
    UNIQUENESS,
    Component,
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


def longest_path(component: Component) -> int:
    """Edges on the longest path inside a component (Table 4/5's "longest path length")."""
    length = dict.fromkeys(component.operators, 0)
    for source, target in sorted(component.edges, key=lambda e: component.operators.index(e[0])):
        length[target] = max(length[target], length[source] + 1)
    return max(length.values())


# --- §5: one-to-one dataflows ------------------------------------------------------------


def test_fig2_two_targets_on_one_path_form_one_component() -> None:
    """Fig. 1/2: Source -> ML_customer -> ML_merchant -> Combiner -> Sink. Updating the
    merchant model and the combiner together must be synchronised along their path."""
    dataflow = Dataflow.of(
        ["source", "ml_customer", "ml_merchant", "combiner", "sink"],
        chain("source", "ml_customer", "ml_merchant", "combiner", "sink"),
    )
    plan = plan_mcs(dataflow, ["combiner", "ml_merchant"])
    assert plan.components == (
        Component(
            operators=("ml_merchant", "combiner"),
            heads=("ml_merchant",),
            edges=(("ml_merchant", "combiner"),),
            targets=("ml_merchant", "combiner"),
        ),
    )


def test_fig6_one_to_one_split_gives_two_components() -> None:
    """Fig. 6 / Example 5.3: a one-to-one X sends each tuple to A or to B, never both, so
    the naive per-operator switch is already serializable: two single-operator components."""
    dataflow = Dataflow.of(
        ["source", split("X"), "A", "B", "sink"],
        [("source", "X"), ("X", "A"), ("X", "B"), ("A", "sink"), ("B", "sink")],
    )
    plan = plan_mcs(dataflow, ["A", "B"])
    assert components(plan) == [{"A"}, {"B"}]
    assert [c.heads for c in plan.components] == [("A",), ("B",)]
    assert plan.edges == frozenset()


def test_fig6_with_a_fan_out_instead_of_a_split_is_one_component() -> None:
    """Def. 5.2: the same shape where X's output goes to both A and B (a fan-out copies,
    as in Swivel's runtime) gives one record two tuples, one for A and one for B, so X is
    one-to-many and heads both."""
    dataflow = Dataflow.of(
        ["source", "X", "A", "B", "sink"],
        [("source", "X"), ("X", "A"), ("X", "B"), ("A", "sink"), ("B", "sink")],
    )
    plan = plan_mcs(dataflow, ["A", "B"])
    assert components(plan) == [{"X", "A", "B"}]
    assert plan.components[0].heads == ("X",)
    assert set(plan.seeds) == {"X", "A", "B"}


FIG5 = Dataflow.of(
    [split("source"), split("X"), "A", "B", "R", "W", "Y", "sink"],
    [
        *chain("source", "X", "A", "R", "sink"),
        *chain("X", "B", "R"),
        *chain("source", "W", "Y", "sink"),
    ],
)


def test_fig7_mcs_of_fig5_has_two_components() -> None:
    """Fig. 5/7 (§5.2-5.3): reconfiguring X, R and Y. X heads {X, A, B, R} (markers go
    X -> A, B -> R, R aligns both); Y is alone and switches on its control message."""
    plan = plan_mcs(FIG5, ["X", "R", "Y"])
    first, second = plan.components
    assert first == Component(
        operators=("X", "A", "B", "R"),
        heads=("X",),
        edges=(("X", "A"), ("X", "B"), ("A", "R"), ("B", "R")),
        targets=("X", "R"),
    )
    assert second == Component(operators=("Y",), heads=("Y",), edges=(), targets=("Y",))
    assert set(plan.seeds) == {"X", "R", "Y"}


def test_alg1_is_the_definition_on_fig5() -> None:
    vertices, edges = minimal_covering_subdag(FIG5, ["X", "R", "Y"])
    assert vertices == {"X", "A", "B", "R", "Y"}
    assert edges == {("X", "A"), ("X", "B"), ("A", "R"), ("B", "R")}


# --- §6: one-to-many ancestors -----------------------------------------------------------


def test_fig8_one_to_many_join_becomes_the_head() -> None:
    """Fig. 8: Join (with Merchants, one-to-many) -> Split -> FD_a | FD_b -> Union. Updating
    FD_a alone must start from the Join, the earliest one-to-many ancestor (§6.2)."""
    dataflow = Dataflow.of(
        ["source", one_to_many("join"), split("split"), "fd_a", "fd_b", "union", "sink"],
        [
            *chain("source", "join", "split", "fd_a", "union", "sink"),
            *chain("split", "fd_b", "union"),
        ],
    )
    for pruning in (True, False):
        plan = plan_mcs(dataflow, ["fd_a"], pruning=pruning)
        assert plan.components == (
            Component(
                operators=("join", "split", "fd_a"),
                heads=("join",),
                edges=(("join", "split"), ("split", "fd_a")),
                targets=("fd_a",),
            ),
        )
        assert set(plan.seeds) == {"join", "fd_a"}


def test_a_target_may_have_several_earliest_one_to_many_ancestors() -> None:
    """§6.2: with one-to-many operators on two parallel branches, both are earliest."""
    dataflow = Dataflow.of(
        ["source", split("split"), one_to_many("j1"), one_to_many("j2"), "union", "R"],
        [*chain("source", "split", "j1", "union", "R"), *chain("split", "j2", "union")],
    )
    plan = plan_mcs(dataflow, ["R"])
    assert set(plan.seeds) == {"j1", "j2", "R"}
    assert plan.components[0].heads == ("j1", "j2")


def test_only_the_earliest_of_nested_one_to_many_ancestors_is_a_seed() -> None:
    dataflow = Dataflow.of(
        ["source", one_to_many("outer"), "map", one_to_many("inner"), "R"],
        chain("source", "outer", "map", "inner", "R"),
    )
    plan = plan_mcs(dataflow, ["R"], pruning=False)
    assert set(plan.seeds) == {"outer", "R"}
    assert components(plan) == [{"outer", "map", "inner", "R"}]


# --- §6.3: pruning -----------------------------------------------------------------------

FIG9_I = Dataflow.of(
    ["source", replicate("RE"), "F1", "R", "F2", "sink"],
    [*chain("source", "RE", "F1", "R", "sink"), *chain("RE", "F2", "sink")],
)


def test_fig9_i_edge_wise_rule_prunes_the_replicate() -> None:
    """Fig. 9 (I): R sees one copy per record, so RE need not synchronise with it."""
    unpruned = plan_mcs(FIG9_I, ["R"], pruning=False)
    assert components(unpruned) == [{"RE", "F1", "R"}]
    pruned = plan_mcs(FIG9_I, ["R"])
    assert components(pruned) == [{"R"}]
    assert pruned.pruned == {"RE": EDGE_WISE_ONE_TO_ONE}
    assert pruned.seeds == ("R",)


def test_fig9_ii_cannot_prune_when_two_out_edges_lead_to_targets() -> None:
    """Fig. 9 (II): X and R get the two copies of one record: both or neither new."""
    dataflow = Dataflow.of(
        ["source", replicate("RE"), "X", "F", "R"],
        [*chain("source", "RE", "X"), *chain("RE", "F", "R")],
    )
    plan = plan_mcs(dataflow, ["X", "R"])
    assert components(plan) == [{"RE", "X", "F", "R"}]
    assert plan.components[0].heads == ("RE",)
    assert plan.pruned == {}


def test_fig9_iii_cannot_prune_when_the_target_receives_every_copy() -> None:
    dataflow = Dataflow.of(
        ["source", replicate("RE"), "A", "B", "R"],
        [*chain("source", "RE", "A", "R"), *chain("RE", "B", "R")],
    )
    plan = plan_mcs(dataflow, ["R"])
    assert components(plan) == [{"RE", "A", "B", "R"}]
    assert plan.pruned == {}


FIG10 = Dataflow.of(
    ["source", replicate("RE"), "A", "B", unique("SJ"), "R", "sink"],
    [*chain("source", "RE", "A", "SJ", "R", "sink"), *chain("RE", "B", "SJ")],
)


def test_fig10_uniqueness_rule_prunes_through_a_self_join() -> None:
    """Fig. 10: the self-join on the primary key emits one tuple per record, so R after it
    sees one tuple per record and needs no synchronisation with RE."""
    assert components(plan_mcs(FIG10, ["R"], pruning=False)) == [{"RE", "A", "B", "SJ", "R"}]
    plan = plan_mcs(FIG10, ["R"])
    assert components(plan) == [{"R"}]
    assert plan.pruned == {"RE": UNIQUENESS}


def test_a_pruned_ancestor_exposes_the_one_to_many_operator_below_it() -> None:
    """Nested: RE is pruned (edge-wise), which leaves R receiving many tuples per record
    from the flatten below it; the flatten must become the head."""
    dataflow = Dataflow.of(
        ["source", replicate("RE"), one_to_many("flatten"), "R", "log"],
        [*chain("source", "RE", "flatten", "R"), ("RE", "log")],
    )
    plan = plan_mcs(dataflow, ["R"])
    assert plan.pruned == {"RE": EDGE_WISE_ONE_TO_ONE}
    assert set(plan.seeds) == {"flatten", "R"}
    assert plan.components[0].heads == ("flatten",)


def test_exposed_ancestors_are_judged_in_turn() -> None:
    """A chain of replicates, each with a dead-end branch: all pruned one after another;
    a flatten after a self-join is exposed by the uniqueness rule and kept."""
    replicates = Dataflow.of(
        ["source", replicate("RE1"), replicate("RE2"), "R", "d1", "d2"],
        [*chain("source", "RE1", "RE2", "R"), ("RE1", "d1"), ("RE2", "d2")],
    )
    plan = plan_mcs(replicates, ["R"])
    assert plan.pruned == {"RE1": EDGE_WISE_ONE_TO_ONE, "RE2": EDGE_WISE_ONE_TO_ONE}
    assert components(plan) == [{"R"}]

    after_self_join = Dataflow.of(
        ["source", one_to_many("M"), unique("SJ"), one_to_many("flatten"), "R"],
        chain("source", "M", "SJ", "flatten", "R"),
    )
    plan = plan_mcs(after_self_join, ["R"])
    assert plan.pruned == {"M": UNIQUENESS}
    assert components(plan) == [{"flatten", "R"}]


# --- §7.1: blocking operators ------------------------------------------------------------


def test_blocking_operator_cuts_its_out_edges() -> None:
    """The aggregate's output never co-runs with its input: the flatten upstream is no
    ancestor of R within R's region, and targets on both sides are separate components."""
    dataflow = Dataflow.of(
        ["source", one_to_many("flatten"), "A", blocking("aggregate"), "R", "sink"],
        chain("source", "flatten", "A", "aggregate", "R", "sink"),
    )
    assert components(plan_mcs(dataflow, ["R"])) == [{"R"}]
    assert components(plan_mcs(dataflow, ["aggregate"])) == [{"flatten", "A", "aggregate"}]
    plan = plan_mcs(dataflow, ["A", "R"])
    assert components(plan) == [{"flatten", "A"}, {"R"}]
    assert ("aggregate", "R") not in plan_mcs(dataflow, ["aggregate", "R"]).edges
    # Without the cut (Alg. 1 alone) the path would be covered.
    assert ("aggregate", "R") in minimal_covering_subdag(dataflow, ["aggregate", "R"])[1]


# --- §8: the experiment tables -----------------------------------------------------------

W2 = Dataflow.of(
    [
        "catalog_sales",
        "J1",
        "J2",
        "J3",
        "J4",
        "sink",
        "warehouse",
        blocking("warehouse_build"),
        "item",
        blocking("item_build"),
    ],
    [
        *chain("catalog_sales", "J1", "J2", "J3", "J4", "sink"),
        *chain("warehouse", "warehouse_build", "J2"),
        *chain("item", "item_build", "J3"),
    ],
)
"""W2 (TPC-DS q40): the probe side is a chain of four primary-key joins J1..J4 (all
one-to-one, §8.1); dimension tables enter through blocking hash builds, which §8.1
excludes ("we only consider the pipelined probe phase") and §7.1 cuts."""

W3 = Dataflow.of(
    ["web_sales", "catalog_sales", "J5", "J6", "J7", "U1", "J8", "J9", "sink"],
    [
        *chain("web_sales", "J5", "J7", "U1", "J8", "J9", "sink"),
        *chain("catalog_sales", "J6", "U1"),
    ],
)
"""W3 (TPC-DS q71): two sales channels into the union U1, then two joins. The figure is
lost; this is the smallest DAG consistent with every Table 4 row: J5 and J6 unrelated
(separate components), J5 -> J7 -> U1 -> J8 (path of 3), J6 into U1, J8 -> J9."""


@pytest.mark.parametrize(
    ("workflow", "targets", "expected", "longest"),
    [
        (W2, ["J1"], [{"J1"}], [0]),
        (W2, ["J2"], [{"J2"}], [0]),
        (W2, ["J1", "J3"], [{"J1", "J2", "J3"}], [2]),
        (W2, ["J1", "J4"], [{"J1", "J2", "J3", "J4"}], [3]),
        (W2, ["J3", "J4"], [{"J3", "J4"}], [1]),
        (W3, ["J5"], [{"J5"}], [0]),
        (W3, ["J5", "J6"], [{"J5"}, {"J6"}], [0, 0]),
        (W3, ["J5", "J6", "J7", "J8"], [{"J5", "J6", "J7", "U1", "J8"}], [3]),
        (W3, ["J5", "J6", "J7", "J9"], [{"J5", "J6", "J7", "U1", "J8", "J9"}], [4]),
        (W3, ["J7", "J8", "J9"], [{"J7", "U1", "J8", "J9"}], [3]),
    ],
)
def test_table4_components_and_longest_paths(
    workflow: Dataflow, targets: list[str], expected: list[set[str]], longest: list[int]
) -> None:
    plan = plan_mcs(workflow, targets)
    assert components(plan) == expected
    assert [longest_path(c) for c in plan.components] == longest
    assert plan == plan_mcs(workflow, targets, pruning=False)  # no one-to-many operators


def test_table4_build_sides_are_separate_regions() -> None:
    plan = plan_mcs(W2, ["item_build", "J3"])
    assert components(plan) == [{"item_build"}, {"J3"}]


W4 = Dataflow.of(
    ["payments_by_user", "F1", one_to_many("U2"), "FD1", "FD2", "F2", "sink"],
    [
        *chain("payments_by_user", "F1", "U2", "FD1", "F2", "sink"),
        *chain("U2", "FD2", "F2"),
    ],
)
"""W4 (§8.8): the unnest U2 splits each user's payment list and sends the payments to both
fraud detectors FD1 and FD2, whose results meet in F2."""


@pytest.mark.parametrize("pruning", [True, False])
@pytest.mark.parametrize(
    ("targets", "expected", "longest"),
    [
        (["F1", "U2"], {"F1", "U2"}, 1),
        (["FD1"], {"U2", "FD1"}, 1),
        (["F2"], {"U2", "FD1", "FD2", "F2"}, None),
    ],
)
def test_table5_one_to_many_unnest(
    targets: list[str], expected: set[str], longest: int | None, pruning: bool
) -> None:
    """Table 5's sets hold with and without pruning (the unnest is not a replicate). Its
    longest path for F2 reads 5, which no DAG on four operators has; we check the sets."""
    plan = plan_mcs(W4, targets, pruning=pruning)
    assert components(plan) == [expected]
    if longest is not None:
        assert longest_path(plan.components[0]) == longest
    assert plan.components[0].heads == (min(expected, key=W4.topological_order.index),)


W5 = Dataflow.of(
    [
        "source",
        replicate("RE"),
        "FD3",
        "S1",
        "F3",
        "F4",
        "FD4",
        unique("SJ"),
        "E1",
        "sink",
    ],
    [
        *chain("source", "RE", "FD3", "S1", "F3", "SJ", "E1", "sink"),
        *chain("RE", "F4", "FD4", "SJ"),
    ],
)
"""W5 (§8.1, §8.9): RE replicates each payment to the user branch FD3 -> S1 -> F3 and the
merchant branch F4 -> FD4; a primary-key self-join SJ (one-to-one, unique per record)
puts the copies back together before E1."""


@pytest.mark.parametrize(
    ("targets", "with_pruning", "without_pruning"),
    [
        (["FD4"], {"FD4"}, {"RE", "F4", "FD4"}),
        (["F3"], {"F3"}, {"RE", "FD3", "S1", "F3"}),
        (["F4"], {"F4"}, {"RE", "F4"}),
        (["FD3", "FD4"], {"RE", "FD3", "F4", "FD4"}, {"RE", "FD3", "F4", "FD4"}),
        (["E1"], {"E1"}, {"RE", "FD3", "S1", "F3", "F4", "FD4", "SJ", "E1"}),
    ],
)
def test_table6_pruning(
    targets: list[str], with_pruning: set[str], without_pruning: set[str]
) -> None:
    assert plan_mcs(W5, targets).operators == with_pruning
    assert plan_mcs(W5, targets, pruning=False).operators == without_pruning


def test_table6_rules_and_edge_counts() -> None:
    """§8.9: FD4/F3/F4 gain by the edge-wise rule, E1 by uniqueness, whose MCS drops
    from eight edges to none."""
    assert plan_mcs(W5, ["FD4"]).pruned == {"RE": EDGE_WISE_ONE_TO_ONE}
    assert plan_mcs(W5, ["E1"]).pruned == {"RE": UNIQUENESS}
    assert len(plan_mcs(W5, ["E1"], pruning=False).edges) == 8
    assert plan_mcs(W5, ["E1"]).edges == frozenset()
    assert plan_mcs(W5, ["FD3", "FD4"]).pruned == {}


# --- API ---------------------------------------------------------------------------------


def test_unknown_names_raise_graph_errors() -> None:
    with pytest.raises(GraphError) as error:
        plan_mcs(W5, ["E1", "nope"])
    assert (error.value.field, error.value.reason) == ("targets[1]", "unknown operator 'nope'")
    with pytest.raises(GraphError) as error:
        minimal_covering_subdag(W5, ["nope"])
    assert error.value.field == "seeds[0]"


def test_no_targets_means_an_empty_plan() -> None:
    plan = plan_mcs(W5, [])
    assert plan == McsPlan(components=(), targets=(), seeds=(), pruned={})
    assert plan.operators == frozenset() and plan.edges == frozenset()


def test_plans_are_hashable_values_independent_of_target_order() -> None:
    first = plan_mcs(FIG5, ["Y", "R", "X", "R"])
    second = plan_mcs(FIG5, ["X", "R", "Y"])
    assert first == second and hash(first) == hash(second)
    assert set(first.targets) == {"X", "R", "Y"}
    assert list(first.targets) == sorted(first.targets, key=FIG5.topological_order.index)


# --- Def. 5.2: fan-outs and broadcast edges ----------------------------------------------

ISSUE_10 = Dataflow.of(
    ["payments", "parse", "s1", "s2", "u", "det", "out"],
    [*chain("payments", "parse", "s1", "u", "det", "out"), *chain("parse", "s2", "u")],
)
"""Issue 10's example: parse's output goes to both s1 and s2, which meet again at u."""


def test_a_fan_out_is_one_to_many_and_heads_its_branches() -> None:
    """parse emits one tuple per branch, so one payment reaches det twice: the switch must
    start above the copies, at parse, not at s1 and s2 (which could switch between them)."""
    for pruning in (True, False):
        plan = plan_mcs(ISSUE_10, ["s1", "s2", "det"], pruning=pruning)
        assert plan.components == (
            Component(
                operators=("parse", "s1", "s2", "u", "det"),
                heads=("parse",),
                edges=(("parse", "s1"), ("parse", "s2"), ("s1", "u"), ("s2", "u"), ("u", "det")),
                targets=("s1", "s2", "det"),
            ),
        )
        assert set(plan.seeds) == {"parse", "s1", "s2", "det"}
        assert plan.pruned == {}


def test_a_fan_out_with_one_branch_towards_the_targets_is_pruned_edge_wise() -> None:
    """Only parse -> s1 leads to the target: s1 sees one copy per payment (§6.3 rule 1)."""
    plan = plan_mcs(ISSUE_10, ["s1"])
    assert components(plan) == [{"s1"}]
    assert plan.pruned == {"parse": EDGE_WISE_ONE_TO_ONE}
    assert components(plan_mcs(ISSUE_10, ["s1"], pruning=False)) == [{"parse", "s1"}]
    # det is reached over both branches: no edge-wise pruning there.
    assert plan_mcs(ISSUE_10, ["det"]).components[0].heads == ("parse",)


def test_a_fan_out_of_a_flatten_stays_plain_one_to_many() -> None:
    """A flatten emits several tuples per edge, so even one target edge needs the head."""
    dataflow = Dataflow.of(
        ["source", one_to_many("flatten"), "R", "log"],
        [*chain("source", "flatten", "R"), ("flatten", "log")],
    )
    plan = plan_mcs(dataflow, ["R"])
    assert plan.pruned == {} and components(plan) == [{"flatten", "R"}]


def test_a_broadcast_edge_into_several_workers_is_not_one_tuple_per_edge() -> None:
    """§7.2: a broadcast copies each tuple to every worker of the consumer. Into one worker
    that is one copy and the edge-wise rule prunes; into two, R's workers get two copies
    of one record, so the sender heads R's component."""
    for workers, expected in ((1, [{"R"}]), (2, [{"A", "R"}])):
        dataflow = Dataflow(
            (Operator("source"), Operator("A"), Operator("R", parallelism=workers)),
            (Edge("source", "A"), Edge("A", "R", Partitioning.BROADCAST)),
        )
        assert components(plan_mcs(dataflow, ["R"])) == expected


def test_a_uniqueness_operator_that_fans_out_does_not_shield_its_own_copies() -> None:
    """A self-join emits one tuple per record, but a fan-out copies it down each out-edge:
    X and R get one copy each, so SJ heads them."""
    dataflow = Dataflow.of(
        ["source", unique("SJ"), "X", "R"], [*chain("source", "SJ", "X"), ("SJ", "R")]
    )
    plan = plan_mcs(dataflow, ["X", "R"])
    assert components(plan) == [{"SJ", "X", "R"}] and plan.pruned == {}


def test_a_blocking_operator_that_fans_out_is_planned_as_pipelined() -> None:
    """Each record the aggregate emits is copied to X and R: the fresh transaction needs a
    head above the copies, so the aggregate's out-edges are not cut."""
    dataflow = Dataflow.of(
        ["source", blocking("aggregate"), "X", "R"],
        [*chain("source", "aggregate", "X"), ("aggregate", "R")],
    )
    plan = plan_mcs(dataflow, ["X", "R"])
    assert components(plan) == [{"aggregate", "X", "R"}]
    assert plan.components[0].heads == ("aggregate",)


def test_a_fanning_uniqueness_operator_is_no_gate_for_the_split_above_it() -> None:
    """flatten -> SJ -> {X, R}: SJ receives several tuples of a record and copies its one
    output to X and R. Pruning flatten through SJ would leave SJ heading X and R while fed
    twice (Lemma 6.3), so flatten stays the head. With one branch towards the targets,
    SJ (one tuple per edge) is pruned edge-wise instead."""
    dataflow = Dataflow.of(
        ["source", one_to_many("flatten"), unique("SJ"), "X", "R"],
        [*chain("source", "flatten", "SJ", "X"), ("SJ", "R")],
    )
    plan = plan_mcs(dataflow, ["X", "R"])
    assert components(plan) == [{"flatten", "SJ", "X", "R"}]
    assert plan.components[0].heads == ("flatten",) and plan.pruned == {}
    single = Dataflow.of(
        ["source", "a", unique("SJ"), "X", "log"],
        [*chain("source", "a", "SJ", "X"), ("SJ", "log")],
    )
    plan = plan_mcs(single, ["X"])
    assert components(plan) == [{"X"}] and plan.pruned == {"SJ": EDGE_WISE_ONE_TO_ONE}
