"""Rescaling a running query: add executors and hand them bins, or hand away the bins of the
executors a plan empties and then remove them (docs/migration.md, "Rescale").

The plan is given (the agent's, made once from the placement the driver reported; or, for a
caller without an agent, `scale_to`'s call of the same planner): this module only asks Spark
for executors, names the plan's new executors as Spark registered them, has the mover carry
the steps out and removes the drained executors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from swivel.controllers.metatopology import MetaTopology
from swivel.controllers.migration import MigrationPlan, Strategy
from swivel.controllers.planning import plan_placement
from swivel.controllers.resuming import StalePlanError, with_executor_ids
from swivel.jobs.migration.migrations import Migration

if TYPE_CHECKING:
    from collections.abc import Callable

    from swivel.jobs.migration.executor import BinMover


def scale_to(
    mover: BinMover,
    executors: int,
    strategy: Strategy | str = Strategy.BATCHED,
    *,
    batch_size: int = 2,
    gap_batches: int = 0,
    **options: Any,
) -> Migration:
    """Plan a rescale with the one planner (`planning.plan_placement`) on the current
    placement and carry it out: for callers without an agent."""
    plan, topology = plan_placement(
        mover.current_assignment(),
        executors=executors,
        strategy=str(strategy),
        batch_size=batch_size,
        gap_batches=gap_batches,
    )
    return rescale(mover, plan, executors, topology=topology, **options)


def rescale(
    mover: BinMover,
    plan: MigrationPlan,
    executors: int,
    *,
    topology: MetaTopology | None = None,
    register_timeout_s: float = 120.0,
    migration_timeout_s: float = 600.0,
    on_submit: Callable[[Migration], None] | None = None,
    prewarm: bool = False,
) -> Migration:
    """Carry out a rescale's plan. Blocks until done (call from a control thread, not from a
    batch). Spark names a new executor only when it starts it (ids are never reused): the
    plan's new executors take the ids Spark registered, steps, bins and order unchanged, and
    the report's message says so. The drained executors are removed only once the
    migration completed."""
    before = sorted(mover.executors(), key=id_order)
    message = ""
    if executors > len(before):
        mover.internals.request_total_executors(executors)
        after = mover.internals.wait_for_executors(executors, register_timeout_s)
        registered = [e for e in after if e not in before]
        try:
            named = with_executor_ids(plan, registered)
        except StalePlanError as error:
            return mover.refuse(plan, str(error), kind="rescale", on_submit=on_submit)
        if named is not plan:
            message = f"new executors registered as {sorted(registered, key=id_order)}"
            plan, topology = named, None  # the plan's G' names the ids it expected
    keep = set(plan.after.values())
    drained = [e for e in before if e not in keep] if executors < len(before) else []
    migration = mover.submit(plan, topology, kind="rescale", on_submit=on_submit, prewarm=prewarm)
    migration.message = message
    mover.wait(migration, migration_timeout_s)
    if drained and migration.phase == "Completed":
        mover.internals.kill_executors(drained)
        mover.internals.request_total_executors(executors)
        mover.internals.wait_for_executors(executors, register_timeout_s)
    return migration


def id_order(executor: str) -> tuple[int, str]:
    return (int(executor), "") if executor.isdigit() else (1 << 30, executor)
