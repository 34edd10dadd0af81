"""Where a migration plan stands against the placement an executor finds (pure).

A plan is made once, from the placement it names (`MigrationPlan.initial`); the migration
executor carries out its steps as given and never plans. Before the first step it checks
the placement it finds: the plan's own starting placement (start at step 0), the placement
after some of its steps (a restarted driver resumes after them: those steps were carried
out already; a step it was cut short in is carried out again), or neither -- then the plan was made for a placement that is gone (bins
moved since, an executor lost, a new driver with a fresh placement), and the executor
refuses it, naming the bins, rather than carrying out moves meant for another placement.
"""

from __future__ import annotations

from collections.abc import Mapping

from .migration import MigrationPlan, Move, Step

SHOWN = 5  # bins named in a refusal; the rest are counted


class StalePlanError(ValueError):
    """The placement found is not one the plan passes through."""


def steps_already_done(plan: MigrationPlan, found: Mapping[int, str]) -> int:
    """How many of the plan's steps `found` already reflects: 0 when it is the plan's
    starting placement, k when it is the placement after steps 0..k-1, or that placement
    with some bins of step k already on their takers (a driver that died while re-pointing
    step k: it is carried out again, its bins already there stay). StalePlanError when it is
    none of these (the message names the bins that differ from the start)."""
    placement = dict(found)
    previous = plan.before
    if set(placement) != set(previous):
        raise StalePlanError(stale_reason(plan, placement))
    for index, after in enumerate(plan.assignments()):
        if placement == previous:
            return index
        if placement == after:
            return index + 1
        step = {m.bin for m in plan.steps[index].moves}
        if all(placement[b] == previous[b] or (b in step and placement[b] == after[b])
               for b in placement):  # fmt: skip
            return index
        previous = after
    if placement == previous:
        return len(plan.steps)
    raise StalePlanError(stale_reason(plan, placement))


def stale_reason(plan: MigrationPlan, found: Mapping[int, str]) -> str:
    assumed = plan.before
    differing = sorted(b for b in assumed if found.get(b) != assumed[b])
    unknown = sorted(set(found) - set(assumed))
    shown = ", ".join(
        f"bin {b} on {found.get(b, 'no executor')!s} (planned from {assumed[b]})"
        for b in differing[:SHOWN]
    )
    more = f" and {len(differing) - SHOWN} more" if len(differing) > SHOWN else ""
    extra = f"; bins {unknown[:SHOWN]} are not in the plan" if unknown else ""
    return (
        f"the placement changed since the plan was made: {shown}{more}{extra}; the plan "
        "is not carried out (nothing moved): submit the Reconfiguration again to plan "
        "from the current placement"
    )


def new_executors(plan: MigrationPlan) -> list[str]:
    """The executors the plan hands bins to that hold none at its start (a scale-out's new
    ones, named by the ids the planner expects Spark to give them)."""
    start = set(plan.initial)
    return sorted({e for e in plan.after.values() if e not in start}, key=_id_order)


def with_executor_ids(plan: MigrationPlan, registered: list[str]) -> MigrationPlan:
    """The plan with its new executors named as Spark registered them (in id order), the
    steps, bins and order unchanged: Spark picks a new executor's id only when it starts
    it (ids are never reused, so after a scale-in the next one is not `max + 1` of the
    survivors). StalePlanError when the counts differ."""
    planned = new_executors(plan)
    fresh = sorted(registered, key=_id_order)
    if len(planned) != len(fresh):
        raise StalePlanError(
            f"the plan hands bins to {len(planned)} new executor(s) {planned}, Spark "
            f"registered {len(fresh)} {fresh}; the plan is not carried out"
        )
    names = dict(zip(planned, fresh, strict=True))
    if all(a == b for a, b in names.items()):
        return plan
    steps = tuple(
        Step(tuple(Move(m.bin, m.source, names.get(m.target, m.target)) for m in step.moves))
        for step in plan.steps
    )
    return MigrationPlan(plan.strategy, plan.initial, steps)


def _id_order(executor: str) -> tuple[int, str]:
    return (int(executor), "") if executor.isdigit() else (1 << 30, executor)
