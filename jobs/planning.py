"""The planner with the runtime's facts: what `swivel plan`, the agent and the operator plan
with, so all three refuse the same Reconfigurations for the same reasons.

`swivel.controllers.planning` may not import the runtime, and only the runtime knows which
operators Spark evaluates once per branch of a split (`swivel.jobs.runtime.shapes`:
a fan-out whose branches meet only after a keyed operator, or end in different sinks). This
module asks the runtime and hands the answer to the planner.
"""

from __future__ import annotations

from collections.abc import Mapping

from swivel.api.reconfiguration import ReconfigurationSpec
from swivel.api.streamjob import StreamJobSpec
from swivel.controllers.planning import ReconfigurationPlan, plan_reconfiguration

__all__ = ["evaluated_per_branch", "plan_for_runtime"]


def evaluated_per_branch(job: StreamJobSpec) -> frozenset[str]:
    """The operators Spark evaluates once per branch of a split (`Shape.replicated`).

    A dataflow the runtime refuses to compile has none: the driver refuses the job itself,
    naming its own field, before any Reconfiguration can reach it.
    """
    from swivel.jobs.runtime.shapes import CompileError, plan_shape

    try:
        return frozenset(plan_shape(job).replicated)
    except CompileError:
        return frozenset()


def plan_for_runtime(
    job: StreamJobSpec,
    reconfiguration: ReconfigurationSpec,
    *,
    current_assignment: Mapping[int, str] | None = None,
    pruning: bool = True,
) -> ReconfigurationPlan:
    """`plan_reconfiguration` with the operators Spark runs once per branch."""
    return plan_reconfiguration(
        job,
        reconfiguration,
        current_assignment=current_assignment,
        pruning=pruning,
        per_branch=evaluated_per_branch(job),
    )
