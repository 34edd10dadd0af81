"""Fries §7.2: the worker dataflow and channel counts, including Table 7."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swivel.api.vocabulary import Cardinality, Partitioning
from swivel.controllers.graph import Dataflow, Edge, GraphError, Operator
from swivel.controllers.mcs import plan_mcs
from swivel.controllers.parallel import (
    ChannelCount,
    count_channels,
    count_channels_materialised,
    parallelize,
    replicate_name,
    worker_targets,
)


def workers(op: str, k: int) -> set[str]:
    return {f"{op}#{i}" for i in range(k)}


def joins_chain(k: int) -> Dataflow:
    """Table 7's workflow, reconstructed. §8.10 reconfigures two joins of W2 (Table 4's
    J1 and J4) with k workers everywhere; "between each pair of join operators, the data was
    shuffled". So: source -forward-> J1 -hash-> J2 -hash-> J3 -hash-> J4 -hash-> sink.
    Channels: k + 4k² in all; the MCS is the path J1..J4, three shuffles, 3k². That gives
    every row of the table: 5/3, 68/48, 588/432, 1,620/1,200, 6,440/4,800."""
    names = ["source", "J1", "J2", "J3", "J4", "sink"]
    return Dataflow(
        tuple(Operator(n, parallelism=k) for n in names),
        (
            Edge("source", "J1", Partitioning.FORWARD),
            *(Edge(a, b, Partitioning.HASH) for a, b in itertools.pairwise(names[1:])),
        ),
    )


@pytest.mark.parametrize(
    ("k", "total", "mcs"),
    [(1, 5, 3), (4, 68, 48), (12, 588, 432), (20, 1_620, 1_200), (40, 6_440, 4_800)],
)
def test_table7_channels(k: int, total: int, mcs: int) -> None:
    dataflow = joins_chain(k)
    expected = ChannelCount(total=total, mcs=mcs)
    assert expected == ChannelCount(total=4 * k * k + k, mcs=3 * k * k)
    assert count_channels(dataflow, ["J1", "J4"]) == expected
    assert count_channels_materialised(dataflow, ["J1", "J4"]) == expected


def test_counting_needs_no_worker_graph_at_large_parallelism() -> None:
    k = 4096  # the API's maximum: 67 million channels, counted from a 2-worker plan
    assert count_channels(joins_chain(k), ["J1", "J4"]) == ChannelCount(
        total=4 * k * k + k, mcs=3 * k * k
    )


def test_parallelize_maps_edges_to_channels() -> None:
    dataflow = Dataflow(
        (
            Operator("src", parallelism=2),
            Operator("join", Cardinality.ONE_TO_MANY, parallelism=2),
            Operator("agg", blocking=True, parallelism=3),
            Operator("out"),
        ),
        (
            Edge("src", "join", Partitioning.FORWARD),
            Edge("join", "agg", Partitioning.HASH),
            Edge("agg", "out", Partitioning.HASH),
        ),
    )
    parallel = parallelize(dataflow)
    names = {op.name for op in parallel.operators}
    assert names == workers("src", 2) | workers("join", 2) | workers("agg", 3) | {"out#0"}
    pairs = {(e.source, e.target) for e in parallel.edges}
    assert {p for p in pairs if p[0].startswith("src")} == {
        ("src#0", "join#0"),
        ("src#1", "join#1"),
    }
    assert {p for p in pairs if p[0].startswith("join")} == set(
        itertools.product(workers("join", 2), workers("agg", 3))
    )
    join0 = parallel.by_name["join#0"]
    assert join0.one_to_many and join0.parallelism == 1  # §7.2: same property as the operator
    assert parallel.by_name["agg#2"].blocking


def test_a_broadcasting_worker_is_followed_by_a_replicate() -> None:
    """§7.2: broadcast is planned as if a Replicate followed the worker. The edge into the
    replicate is not a channel; the k_u·k_v edges out of the replicates are."""
    dataflow = Dataflow(
        (Operator("rules", parallelism=2), Operator("R", parallelism=3)),
        (Edge("rules", "R", Partitioning.BROADCAST),),
    )
    parallel = parallelize(dataflow)
    fan_out = replicate_name("rules", 0, "R")
    assert fan_out == "rules#0>R"
    replica = parallel.by_name[fan_out]
    assert replica.one_to_many and replica.at_most_one_per_edge
    assert parallel.children["rules#0"] == (fan_out,)
    assert set(parallel.children[fan_out]) == workers("R", 3)
    # Each record reaches all three R workers, so they must switch together: the
    # replicates head the component and all six channels synchronise.
    plan = plan_mcs(parallel, worker_targets(dataflow, ["R"]))
    assert {h for c in plan.components for h in c.heads} == {"rules#0>R", "rules#1>R"}
    assert count_channels(dataflow, ["R"]) == ChannelCount(total=6, mcs=6)
    # With one R worker each record reaches R once: the replicate is pruned.
    single = dataclasses.replace(
        dataflow, operators=(Operator("rules", parallelism=2), Operator("R"))
    )
    assert count_channels(single, ["R"]) == ChannelCount(total=2, mcs=0)


def test_fig11_parallel_join_workers_head_the_component() -> None:
    """Fig. 11: Fig. 8 with two workers per operator; updating FD_a updates both its
    workers, and both (one-to-many) join workers become heads."""
    names = ["source", "join", "split", "fd_a", "fd_b", "union"]
    dataflow = Dataflow(
        tuple(
            Operator(
                n, Cardinality.ONE_TO_MANY if n == "join" else Cardinality.ONE_TO_ONE, parallelism=2
            )
            for n in names
        ),
        (
            Edge("source", "join", Partitioning.HASH),
            Edge("join", "split", Partitioning.HASH),
            Edge("split", "fd_a", Partitioning.FORWARD),
            Edge("split", "fd_b", Partitioning.FORWARD),
            Edge("fd_a", "union", Partitioning.HASH),
            Edge("fd_b", "union", Partitioning.HASH),
        ),
    )
    plan = plan_mcs(parallelize(dataflow), worker_targets(dataflow, ["fd_a"]))
    assert plan.operators == workers("join", 2) | workers("split", 2) | workers("fd_a", 2)
    assert [c.heads for c in plan.components] == [("join#0", "join#1")]
    assert count_channels(dataflow, ["fd_a"]) == ChannelCount(
        total=2 * 4 + 2 + 2 + 2 * 4, mcs=4 + 2
    )


def test_worker_level_pruning_judges_each_worker_on_its_own() -> None:
    """Fig. 9 (I) with two workers. Over forward edges each replicate worker still feeds R
    on one channel and is pruned. Over a hash edge a replicate worker has two channels
    towards R's workers, so the edge-wise rule (run on the workers, as §7.2 says) keeps
    it: sound, more cautious than the operator-level plan."""

    def fig9(partitioning: Partitioning) -> Dataflow:
        return Dataflow(
            tuple(
                dataclasses.replace(op, parallelism=2)
                for op in (
                    Operator("source"),
                    Operator("RE", Cardinality.ONE_TO_MANY, at_most_one_per_edge=True),
                    Operator("F1"),
                    Operator("R"),
                    Operator("F2"),
                )
            ),
            (
                Edge("source", "RE"),
                Edge("RE", "F1", partitioning),
                Edge("F1", "R"),
                Edge("RE", "F2"),
            ),
        )

    forward = fig9(Partitioning.FORWARD)
    assert plan_mcs(forward, ["R"]).operators == {"R"}
    assert count_channels(forward, ["R"]) == ChannelCount(total=8, mcs=0)
    hashed = fig9(Partitioning.HASH)
    assert count_channels(hashed, ["R"]) == ChannelCount(total=10, mcs=4 + 2)


def test_errors() -> None:
    uneven = Dataflow((Operator("a", parallelism=2), Operator("b")), (Edge("a", "b"),))
    for call in (parallelize, lambda d: count_channels(d, ["b"])):
        with pytest.raises(GraphError) as error:
            call(uneven)
        assert error.value.field == "edges[0]"
    with pytest.raises(GraphError) as error:
        count_channels(joins_chain(2), ["J1", "nope"])
    assert error.value.field == "targets[1]"
    assert count_channels(joins_chain(2), []) == ChannelCount(total=18, mcs=0)


# --- properties: the capped count is the materialised count ------------------------------

KINDS = [
    Operator("_"),
    Operator("_"),
    Operator("_", Cardinality.ONE_TO_MANY, at_most_one_per_edge=True),
    Operator("_", Cardinality.ONE_TO_MANY),
    Operator("_", unique_per_record=True),
    Operator("_", blocking=True),
]


@st.composite
def parallel_cases(draw: st.DrawFn) -> tuple[Dataflow, list[str]]:
    count = draw(st.integers(1, 7))
    operators = [
        dataclasses.replace(
            draw(st.sampled_from(KINDS)), name=f"op{i}", parallelism=draw(st.integers(1, 3))
        )
        for i in range(count)
    ]
    edges = []
    for index in range(1, count):
        for parent in sorted(draw(st.sets(st.integers(0, index - 1), max_size=2))):
            choices = [Partitioning.HASH, Partitioning.BROADCAST]
            if operators[parent].parallelism == operators[index].parallelism:
                choices.append(Partitioning.FORWARD)
            edges.append(Edge(f"op{parent}", f"op{index}", draw(st.sampled_from(choices))))
    targets = draw(st.lists(st.sampled_from([op.name for op in operators]), min_size=1, max_size=3))
    return Dataflow(tuple(operators), tuple(edges)), targets


@settings(max_examples=150, deadline=None)
@given(parallel_cases())
def test_capped_count_matches_the_materialised_worker_graph(
    case: tuple[Dataflow, list[str]],
) -> None:
    dataflow, targets = case
    for pruning in (True, False):
        assert count_channels(dataflow, targets, pruning=pruning) == count_channels_materialised(
            dataflow, targets, pruning=pruning
        )


@settings(max_examples=100, deadline=None)
@given(parallel_cases())
def test_an_operators_workers_are_all_in_the_mcs_or_none(
    case: tuple[Dataflow, list[str]],
) -> None:
    """The symmetry the capped count relies on."""
    dataflow, targets = case
    plan = plan_mcs(parallelize(dataflow), worker_targets(dataflow, targets))
    for op in dataflow.operators:
        inside = workers(op.name, op.parallelism) & plan.operators
        assert inside in (set(), workers(op.name, op.parallelism))


def test_a_fan_out_makes_its_workers_one_to_many_but_hash_edges_do_not() -> None:
    """Issue 10 at two workers: parse's workers copy to s1 and s2 (logical fan-out) and
    head the component; payments' workers hash to two parse workers, one tuple each, so
    they stay one-to-one and outside."""
    names = ["payments", "parse", "s1", "s2", "u", "det"]
    dataflow = Dataflow(
        tuple(Operator(n, parallelism=2) for n in names),
        (
            Edge("payments", "parse", Partitioning.HASH),
            Edge("parse", "s1", Partitioning.HASH),
            Edge("parse", "s2"),
            Edge("s1", "u", Partitioning.HASH),
            Edge("s2", "u", Partitioning.HASH),
            Edge("u", "det", Partitioning.HASH),
        ),
    )
    plan = plan_mcs(parallelize(dataflow), worker_targets(dataflow, ["s1", "s2", "det"]))
    assert [c.heads for c in plan.components] == [("parse#0", "parse#1")]
    assert not plan.operators & workers("payments", 2)
    assert count_channels(dataflow, ["s1", "s2", "det"]) == count_channels_materialised(
        dataflow, ["s1", "s2", "det"]
    )
