"""Fries §7.2: the worker-level dataflow, and how many data channels a reconfiguration
synchronises.

Each operator with parallelism k becomes workers `op#0 … op#k-1` that keep its cardinality
and flags (a worker of a one-to-many join is one-to-many, as the paper says for hash and
range partitioning), resolved first for the logical fan-outs (Def. 5.2,
`graph.resolve_fan_outs`): a worker of an operator with two consumers sends each tuple to
both, though its hash edges to one consumer's workers send it to one of them, so the worker
graph is planned with the logical cardinality, not re-resolved from its own out-degree. A forward edge joins worker i to worker i; a hash edge joins every
upstream worker to every downstream worker. A broadcasting worker sends each tuple to all
downstream workers, which the paper plans "as if a Replicate operator followed it": each
(worker, broadcast edge) pair gets an implicit replicate node `op#i>target`, one-to-many
with at most one tuple per out-edge. One replicate per broadcast edge rather than per
worker, so a one-to-one operator with two broadcast edges is not taken to send one tuple
down both.

A *channel* is a worker-to-worker link: k per forward edge, k_u·k_v per hash or broadcast
edge. The edge from a worker into its own replicate node is not a channel.

The MCS of the worker dataflow is `plan_mcs` run on it directly, as §7.2 prescribes, with
each worker judged on its own. That is sound but can be more cautious than the
operator-level plan: the worker graph does not know that the workers of one uniqueness
operator *jointly* emit at most one tuple per record, nor that a replicate sends one tuple
per logical edge whichever worker receives it, so a pruning rule that fires on the
operators may not fire on the workers when hash or broadcast edges fan out between them.

Counting without materialising k² channels. The worker graph is symmetric: permuting the
worker indices of every operator linked by forward edges (hash and broadcast edges join
all to all) maps it onto itself and maps the targets' workers onto themselves, so the MCS
holds all workers of an operator or none, and all channels of an edge or none. What the
pruning rules see of a parallelism is only whether it is 1 or more (does an edge fan out
to one worker or several), so planning with every parallelism capped at 2 decides the
same operators and edges; the counts then use the real parallelism. Tests check this
against the fully materialised worker graph.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from swivel.api.vocabulary import Cardinality, Partitioning

from .graph import Dataflow, Edge, GraphError, Operator, resolve_fan_outs
from .mcs import plan_mcs

__all__ = [
    "ChannelCount",
    "count_channels",
    "count_channels_materialised",
    "parallelize",
    "replicate_name",
    "worker_name",
    "worker_targets",
]

# Planning with parallelism min(k, _SYMMETRY_CAP) decides the same MCS operators (module doc).
_SYMMETRY_CAP = 2


@dataclass(frozen=True)
class ChannelCount:
    """Data channels of the whole dataflow, and those an epoch marker must cross in the MCS."""

    total: int
    mcs: int


def worker_name(operator: str, index: int) -> str:
    return f"{operator}#{index}"


def replicate_name(operator: str, index: int, receiver: str) -> str:
    """The implicit replicate after worker `index` of `operator` on its edge to `receiver`."""
    return f"{worker_name(operator, index)}>{receiver}"


def parallelize(dataflow: Dataflow) -> Dataflow:
    """The worker dataflow of §7.2 (see the module doc for names and replicate nodes).

    Its operators carry their logical operator's resolved cardinality, so it is marked
    `fan_outs_resolved`: `plan_mcs` must not read a worker's hash edges as a fan-out.
    """
    _check_forward_parallelism(dataflow)
    dataflow = resolve_fan_outs(dataflow, broadcast=False)  # broadcasts: replicate nodes
    operators = [
        replace(op, name=worker_name(op.name, i), parallelism=1)
        for op in dataflow.operators
        for i in range(op.parallelism)
    ]
    replicates: dict[str, Operator] = {}
    edges: list[Edge] = []
    for edge in dataflow.edges:
        up = dataflow.by_name[edge.source].parallelism
        down = dataflow.by_name[edge.target].parallelism
        if edge.partitioning is Partitioning.FORWARD:
            edges.extend(_link(edge, i, i) for i in range(up))
        elif edge.partitioning is Partitioning.HASH:
            edges.extend(_link(edge, i, j) for i in range(up) for j in range(down))
        else:
            for i in range(up):
                fan_out = replicate_name(edge.source, i, edge.target)
                replicates.setdefault(fan_out, _implicit_replicate(fan_out))
                edges.append(Edge(worker_name(edge.source, i), fan_out))
                edges.extend(
                    Edge(fan_out, worker_name(edge.target, j), Partitioning.BROADCAST)
                    for j in range(down)
                )
    return Dataflow((*operators, *replicates.values()), tuple(edges), fan_outs_resolved=True)


def worker_targets(dataflow: Dataflow, targets: Iterable[str]) -> tuple[str, ...]:
    """Every worker of every target: §7.2 maps an update of op to updates of all its workers."""
    found: list[str] = []
    for index, name in enumerate(targets):
        op = dataflow.by_name.get(name)
        if op is None:
            raise GraphError(f"targets[{index}]", f"unknown operator {name!r}")
        found.extend(worker_name(name, i) for i in range(op.parallelism))
    return tuple(found)


def count_channels(
    dataflow: Dataflow, targets: Iterable[str], *, pruning: bool = True
) -> ChannelCount:
    """Channels of the whole dataflow and of the worker-level MCS, at any parallelism.

    Plans the worker graph with parallelism capped at 2 and scales the counts (module doc),
    so 4096 workers cost no more than 2.
    """
    _check_forward_parallelism(dataflow)
    wanted = tuple(targets)
    total = sum(_channels(dataflow, edge) for edge in dataflow.edges)
    if not wanted:
        return ChannelCount(total=total, mcs=0)
    capped = Dataflow(
        tuple(
            replace(op, parallelism=min(op.parallelism, _SYMMETRY_CAP)) for op in dataflow.operators
        ),
        dataflow.edges,
    )
    plan = plan_mcs(parallelize(capped), worker_targets(capped, wanted), pruning=pruning)
    in_mcs = plan.edges
    mcs = sum(
        _channels(dataflow, edge) for edge in dataflow.edges if _first_channel(edge) in in_mcs
    )
    return ChannelCount(total=total, mcs=mcs)


def count_channels_materialised(
    dataflow: Dataflow, targets: Iterable[str], *, pruning: bool = True
) -> ChannelCount:
    """The same counts read off the full worker graph: the reference `count_channels` must
    match. Costs O(k²) per hash edge; for tests and small parallelism."""
    workers = parallelize(dataflow)
    plan = plan_mcs(workers, worker_targets(dataflow, targets), pruning=pruning)
    ends = {worker_name(op.name, i) for op in dataflow.operators for i in range(op.parallelism)}
    channels = [edge for edge in workers.edges if edge.target in ends]
    in_mcs = plan.edges
    return ChannelCount(
        total=len(channels),
        mcs=sum((edge.source, edge.target) in in_mcs for edge in channels),
    )


def _check_forward_parallelism(dataflow: Dataflow) -> None:
    for index, edge in enumerate(dataflow.edges):
        up = dataflow.by_name[edge.source].parallelism
        down = dataflow.by_name[edge.target].parallelism
        if edge.partitioning is Partitioning.FORWARD and up != down:
            raise GraphError(
                f"edges[{index}]",
                f"a forward edge needs equal parallelism ({edge.source}: {up}, "
                f"{edge.target}: {down})",
            )


def _link(edge: Edge, i: int, j: int) -> Edge:
    return Edge(worker_name(edge.source, i), worker_name(edge.target, j), edge.partitioning)


def _implicit_replicate(name: str) -> Operator:
    return Operator(name, Cardinality.ONE_TO_MANY, at_most_one_per_edge=True)


def _channels(dataflow: Dataflow, edge: Edge) -> int:
    up = dataflow.by_name[edge.source].parallelism
    if edge.partitioning is Partitioning.FORWARD:
        return up
    return up * dataflow.by_name[edge.target].parallelism


def _first_channel(edge: Edge) -> tuple[str, str]:
    """The channel from worker 0 on `edge`; by symmetry it is in the MCS iff all are."""
    receiver = worker_name(edge.target, 0)
    if edge.partitioning is Partitioning.BROADCAST:
        return replicate_name(edge.source, 0, edge.target), receiver
    return worker_name(edge.source, 0), receiver
