"""Turning a Reconfiguration into a plan: the one function the CLI, the agent and the
operator all call, so `swivel plan` shows exactly what would be carried out.

A plan is data. Function updates become Fries MCS components (who switches on the control
message, who follows tags); rescales and bin moves become a Chi meta-topology and a
Megaphone step list. Nothing here imports the referenced functions or touches a cluster.

A plan also says what the runtime cannot carry out consistently (`refusals`, the one
function that decides it for the CLI, the agent and the operator) and which scheduler is
the least disruptive consistent one. Which operators Spark evaluates once per branch of a
split comes from the Spark-free shape the runtime compiles (`swivel.controllers.shapes`),
so the CLI, the agent and the operator refuse the same plans for the same reasons.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from swivel.api.base import Disruption
from swivel.api.dataflow import DataflowSpec, OperatorKind, OperatorSpec
from swivel.api.reconfiguration import ReconfigurationSpec, Scheduler
from swivel.api.streamjob import StreamJobSpec
from swivel.controllers.assignments import apply_moves, bins_per_executor, rebalance_for_executors
from swivel.controllers.graph import Dataflow, Edge, Operator
from swivel.controllers.mcs import McsPlan, plan_mcs
from swivel.controllers.metatopology import MetaTopology, plan_meta_topology
from swivel.controllers.migration import MigrationPlan, plan_migration
from swivel.controllers.parallel import ChannelCount, count_channels
from swivel.controllers.shapes import CompileError, plan_shape


def evaluated_per_branch(job: StreamJobSpec) -> frozenset[str]:
    """The operators Spark evaluates once per branch of a split (`Shape.replicated`).

    A dataflow the runtime refuses to compile has none: the driver refuses the job itself,
    naming its own field, before any Reconfiguration can reach it.
    """
    try:
        return frozenset(plan_shape(job).replicated)
    except CompileError:
        return frozenset()


def dataflow_of(spec: DataflowSpec) -> Dataflow:
    """The planners' immutable DAG of what the user wrote (the model has checked that it is
    one: names, inputs, no cycle, forward parallelism), each operator's preset resolved."""
    edges = tuple(
        Edge(source=edge.from_, target=op.name, partitioning=edge.partitioning)
        for op in spec.operators
        for edge in op.inputs
    )
    return Dataflow(tuple(_operator_of(op) for op in spec.operators), edges)


def _operator_of(op: OperatorSpec) -> Operator:
    return Operator(
        name=op.name,
        cardinality=op.resolved_cardinality,
        at_most_one_per_edge=op.resolved_at_most_one_per_edge,
        unique_per_record=op.unique_per_record,
        blocking=op.resolved_blocking,
        parallelism=op.parallelism,
    )


def assumed_assignment(bins: int, executors: int) -> dict[int, str]:
    """Round-robin placement, used when no placement has been observed from the job.

    Executor ids follow Spark's (`"0"`, `"1"`, ...). The live agent replaces this with the
    StateStoreCoordinator's real placement before anything moves.
    """
    return {b: str(b % executors) for b in range(bins)}


# Spark masters that run executors apart from the driver, so bins of state can move
# between them: Spark on Kubernetes, a standalone master, Spark's local test cluster.
MULTI_EXECUTOR_MASTERS = ("k8s://", "spark://", "local-cluster")


def migrates_bins(master: str) -> bool:
    """Does a driver on `master` run a MigrationDriver (moves, rescales, loads, coordination)?

    Local Spark (`local`, `local[N]`) is one executor: nothing to move or balance. The
    driver container and the operator's renderer (the agent's SWIVEL_AGENT_MIGRATIONS) both
    decide with this.
    """
    return master.strip().startswith(MULTI_EXECUTOR_MASTERS)


def executor_ids_after_rescale(current: Mapping[int, str], executors: int) -> list[str]:
    """Keep existing executors; add fresh ids, or drain the least-loaded ones first."""
    loads = bins_per_executor(current)
    known = sorted(set(current.values()), key=_spark_id_order)
    if executors >= len(known):
        next_id = max((int(e) for e in known if e.isdigit()), default=-1) + 1
        return known + [str(next_id + i) for i in range(executors - len(known))]
    # Draining the executors holding the fewest bins moves the least state.
    keep = sorted(known, key=lambda e: (-loads.get(e, 0), _spark_id_order(e)))[:executors]
    return sorted(keep, key=_spark_id_order)


def _spark_id_order(executor: str) -> tuple[int, str]:
    return (int(executor), "") if executor.isdigit() else (1 << 30, executor)


@dataclass(frozen=True)
class Refusal:
    """Why the runtime cannot carry a plan out consistently, on the field to change."""

    field: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"field": self.field, "reason": self.reason}

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}"


# Switching at a micro-batch boundary: every task of a batch runs under one configuration,
# so an operator Spark runs once per branch runs both times under the same version.
BOUNDARY_SCHEDULERS: Final = ("epoch", "restart")
_USE_EPOCH: Final = "use scheduler: epoch (or restart)"


def refusals(
    scheduler: str,
    updates: Sequence[str],
    components: Iterable[tuple[Sequence[str], Sequence[str]]],
    *,
    per_branch: Collection[str],
    codeless: Collection[str],
) -> list[Refusal]:
    """What Spark cannot carry out consistently when `scheduler` switches `updates` (the
    operators of `spec.functionUpdates`, in order) with Fries `components` ((heads,
    targets) each). `per_branch`: operators Spark evaluates once per branch of a split
    (`swivel.controllers.shapes`); `codeless`: operators that run no Python code.

    - fries: a head stamps each record's version tag. Run once per branch, in different
      tasks, it may stamp one record old in one branch and new in the other; a head that
      runs no code (the source, a union without a function) stamps nothing. Every target
      lies below a head of its component, and an operator's ancestors run once per branch
      when it does, so checking the heads covers the targets.
    - naive (benchmark only): each target switches on its own, so a target run once per
      branch may switch between its runs.
    - epoch, restart: nothing (a boundary switch; see BOUNDARY_SCHEDULERS).
    """
    if scheduler in BOUNDARY_SCHEDULERS:
        return []
    index = {name: i for i, name in reversed(list(enumerate(updates)))}
    found: list[Refusal] = []
    if scheduler != "fries":
        for i, name in enumerate(updates):
            if name in per_branch:
                found.append(
                    Refusal(f"spec.functionUpdates[{i}].operator", _per_branch(name, scheduler))
                )
        return found
    for heads, targets in components:
        for head in heads:
            if head in per_branch:
                field = (
                    f"spec.functionUpdates[{index[head]}].operator"
                    if head in index
                    else "spec.scheduler"
                )
                reason = (
                    _per_branch(head, scheduler)
                    if head in index
                    else (
                        f"fries would switch at {head!r}, the head of the component of "
                        f"{sorted(targets)}, and {head!r} runs once per branch of a split in this "
                        "dataflow (docs/runtime.md, Splits), so one record could reach them "
                        f"under both versions; {_USE_EPOCH}"
                    )
                )
                found.append(Refusal(field, reason))
            elif head in codeless:
                found.append(
                    Refusal(
                        "spec.scheduler",
                        f"fries would switch at {head!r}, the head of the component of "
                        f"{sorted(targets)}, and {head!r} runs no function of its own, so "
                        "nothing would stamp the version each record is to be processed "
                        f"under (docs/planning.md); {_USE_EPOCH}",
                    )
                )
    return list(dict.fromkeys(found))


def _per_branch(name: str, scheduler: str) -> str:
    return (
        f"{name!r} runs once per branch of a split in this dataflow (docs/runtime.md, "
        "Splits), so a switch within a micro-batch could give one record both versions; "
        f"use scheduler: epoch (or restart), not {scheduler}"
    )


def suggested_scheduler(fries_refusals: Sequence[Refusal]) -> Scheduler:
    """The least disruptive consistent scheduler: fries when it is refused nothing, else
    epoch, which Spark always carries out consistently (every task of a micro-batch runs
    under one configuration). Restart is never needed for consistency: it switches at a
    boundary too, and costs a restart of the query."""
    return Scheduler.EPOCH if fries_refusals else Scheduler.FRIES


# The kinds the runtime runs without a function; any other kind needs one to compile at all.
_CODELESS_KINDS: Final = frozenset({OperatorKind.SOURCE, OperatorKind.SINK, OperatorKind.UNION})


def codeless_operators(job: StreamJobSpec) -> frozenset[str]:
    """Operators that run no Python code (the source, sinks, a union without a function):
    Swivel's runtime stamps a record's version tag in an operator's function wrapper.
    Another kind without a function is refused by the runtime when the job is compiled,
    naming its own field, so it is not refused here a second time."""
    return frozenset(
        op.name
        for op in job.dataflow.operators
        if op.function is None and op.kind in _CODELESS_KINDS
    )


@dataclass(frozen=True)
class ReconfigurationPlan:
    scheduler: Scheduler
    disruption: Disruption
    mcs: McsPlan | None
    channels: ChannelCount
    migration: MigrationPlan | None
    meta_topology: MetaTopology | None
    pruning: bool
    refused: tuple[Refusal, ...] = ()
    suggested_scheduler: Scheduler = Scheduler.FRIES

    def to_dict(self) -> dict[str, Any]:
        mcs = self.mcs
        return {
            "kind": self.disruption.label,
            "scheduler": self.scheduler.value,
            "refused": [r.to_dict() for r in self.refused],
            "suggestedScheduler": self.suggested_scheduler.value,
            "pruning": self.pruning,
            "targets": list(mcs.targets) if mcs else [],
            "seeds": list(mcs.seeds) if mcs else [],
            "pruned": dict(mcs.pruned) if mcs else {},
            "components": [
                {
                    "operators": list(c.operators),
                    "heads": list(c.heads),
                    "edges": [list(e) for e in c.edges],
                    "targets": list(c.targets),
                }
                for c in (mcs.components if mcs else ())
            ],
            "channels": {"total": self.channels.total, "mcs": self.channels.mcs},
            "migration": self.migration.to_dict() if self.migration else None,
            "metaTopology": self.meta_topology.to_dict() if self.meta_topology else None,
        }


def plan_reconfiguration(
    job: StreamJobSpec,
    reconfiguration: ReconfigurationSpec,
    *,
    current_assignment: Mapping[int, str] | None = None,
    pruning: bool = True,
    per_branch: Collection[str] | None = None,
    scheduler_override: str | None = None,
) -> ReconfigurationPlan:
    """Plan `reconfiguration` of `job`: the one function `swivel plan`, the agent and the
    operator call. Validate with `validate_against_job` first.

    `per_branch`: the operators Spark evaluates once per branch of a split; by default
    those of the job's compiled shape (`evaluated_per_branch`), given only by tests that
    plan a paper's example without a runnable job. `scheduler_override`: the scheduler
    that will carry the plan out instead of the spec's (the agent's benchmark-only
    `schedulerOverride`, naive), so `refused` is what that one cannot carry out.
    """
    if per_branch is None:
        per_branch = evaluated_per_branch(job)
    dataflow = dataflow_of(job.dataflow)
    targets = reconfiguration.targets
    mcs = plan_mcs(dataflow, targets, pruning=pruning) if targets else None
    channels = count_channels(dataflow, targets, pruning=pruning)
    migration, meta = _plan_placement(job, reconfiguration, current_assignment)
    components = [(c.heads, c.targets) for c in (mcs.components if mcs else ())]
    facts = {"per_branch": frozenset(per_branch), "codeless": codeless_operators(job)}
    scheduler = scheduler_override or reconfiguration.scheduler.value
    refused = refusals(scheduler, targets, components, **facts)
    suggested = reconfiguration.scheduler
    if targets:
        suggested = suggested_scheduler(refusals("fries", targets, components, **facts))
    return ReconfigurationPlan(
        scheduler=reconfiguration.scheduler,
        disruption=_disruption(reconfiguration, migration),
        mcs=mcs,
        channels=channels,
        migration=migration,
        meta_topology=meta,
        pruning=pruning,
        refused=tuple(refused),
        suggested_scheduler=suggested,
    )


def _plan_placement(
    job: StreamJobSpec,
    reconfiguration: ReconfigurationSpec,
    current_assignment: Mapping[int, str] | None,
) -> tuple[MigrationPlan | None, MetaTopology | None]:
    if not (reconfiguration.rescale or reconfiguration.moves):
        return None, None
    current = current_assignment or assumed_assignment(job.dataflow.bins, job.executor.instances)
    settings = reconfiguration.migration
    return plan_placement(
        current,
        executors=reconfiguration.rescale.executors if reconfiguration.rescale else None,
        moves=[(move.bins, move.to) for move in reconfiguration.moves],
        strategy=settings.strategy.value,
        batch_size=settings.batch_size,
        gap_batches=settings.gap_batches,
    )


def plan_placement(
    current: Mapping[int, str],
    *,
    executors: int | None = None,
    moves: Sequence[tuple[Sequence[int], str]] = (),
    strategy: str = "batched",
    batch_size: int = 4,
    gap_batches: int = 0,
) -> tuple[MigrationPlan, MetaTopology]:
    """The migration from placement `current` for a rescale to `executors` and/or `moves`
    (bins, to): the steps in Chi's hand-over order and the meta-topology they follow. The
    one placement planner: the agent calls it (through `plan_reconfiguration`) with the
    placement its driver reported, `swivel plan --placement` with the one it is given."""
    start = dict(current)
    target = start
    if executors is not None:
        target = rebalance_for_executors(start, executor_ids_after_rescale(start, executors))
    if moves:
        target = apply_moves(target, [(list(bins), to) for bins, to in moves])
    migration = plan_migration(
        start, target, strategy, batch_size=batch_size, gap_batches=gap_batches
    )
    return migration, plan_meta_topology(start, target)


def _disruption(
    reconfiguration: ReconfigurationSpec, migration: MigrationPlan | None
) -> Disruption:
    if reconfiguration.scheduler is Scheduler.RESTART:
        return Disruption.RESTART
    if migration is not None and migration.moves:
        return Disruption.LIVE_MIGRATION
    # A coordination interval is a driver action, as fast as a control message.
    live = reconfiguration.function_updates or reconfiguration.coordination is not None
    return Disruption.LIVE_CONTROL if live else Disruption.NONE
