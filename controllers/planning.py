"""Turning a Reconfiguration into a plan: the one function the CLI, the agent and the
operator all call, so `swivel plan` shows exactly what would be carried out.

A plan is data. Function updates become Fries MCS components (who switches on the control
message, who follows tags); rescales and bin moves become a Chi meta-topology and a
Megaphone step list. Nothing here imports the referenced functions or touches a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from swivel.api.base import Disruption
from swivel.api.reconfiguration import ReconfigurationSpec, Scheduler
from swivel.api.streamjob import StreamJobSpec
from swivel.controllers.assignments import apply_moves, bins_per_executor, rebalance_for_executors
from swivel.controllers.mcs import McsPlan, plan_mcs
from swivel.controllers.metatopology import MetaTopology, plan_meta_topology
from swivel.controllers.migration import MigrationPlan, plan_migration
from swivel.controllers.parallel import ChannelCount, count_channels


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
class ReconfigurationPlan:
    scheduler: Scheduler
    disruption: Disruption
    mcs: McsPlan | None
    channels: ChannelCount
    migration: MigrationPlan | None
    meta_topology: MetaTopology | None
    pruning: bool

    def to_dict(self) -> dict[str, Any]:
        mcs = self.mcs
        return {
            "kind": self.disruption.label,
            "scheduler": self.scheduler.value,
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
) -> ReconfigurationPlan:
    """Plan `reconfiguration` of `job`. Validate with `validate_against_job` first."""
    dataflow = job.dataflow.to_planner()
    targets = reconfiguration.targets
    mcs = plan_mcs(dataflow, targets, pruning=pruning) if targets else None
    channels = count_channels(dataflow, targets, pruning=pruning)
    migration, meta = _plan_placement(job, reconfiguration, current_assignment)
    return ReconfigurationPlan(
        scheduler=reconfiguration.scheduler,
        disruption=_disruption(reconfiguration, migration),
        mcs=mcs,
        channels=channels,
        migration=migration,
        meta_topology=meta,
        pruning=pruning,
    )


def _plan_placement(
    job: StreamJobSpec,
    reconfiguration: ReconfigurationSpec,
    current_assignment: Mapping[int, str] | None,
) -> tuple[MigrationPlan | None, MetaTopology | None]:
    if not (reconfiguration.rescale or reconfiguration.moves):
        return None, None
    current = dict(
        current_assignment or assumed_assignment(job.dataflow.bins, job.executor.instances)
    )
    target = current
    if reconfiguration.rescale:
        executors = executor_ids_after_rescale(current, reconfiguration.rescale.executors)
        target = rebalance_for_executors(current, executors)
    if reconfiguration.moves:
        target = apply_moves(target, [(move.bins, move.to) for move in reconfiguration.moves])
    settings = reconfiguration.migration
    migration = plan_migration(
        current,
        target,
        settings.strategy.value,
        batch_size=settings.batch_size,
        gap_batches=settings.gap_batches,
    )
    return migration, plan_meta_topology(current, target)


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
