"""Reconfiguration decisions (pure): admission and queueing, the agent's answers (its plan
is the one status shows: the operator never plans), status.

The handlers in `reconfigurations` observe (the object, its job, its siblings, the agent),
call these functions, and carry out the returned `Decision`. One reconfiguration runs at a
time per job: a sibling in Planned or Applying holds the job; otherwise the oldest waiting
one (creation time, then name) goes first. Every handler computes the same head of the
queue from the same view of the job's siblings, so no lock across objects is needed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from swivel.api.conditions import Condition, ConditionStatus, set_condition
from swivel.api.phases import FINAL_PHASES
from swivel.api.reconfiguration import Progress, ReconfigurationStatus, Timings
from swivel.operator.phases import ACTIVE, WAITING, Phase, Reason, parse_phase, transition

AGENT_TIMINGS = frozenset(
    {"acceptedAt", "firstSwitchAt", "lastSwitchAt", "inEffectAt", "completedAt"}
)


@dataclass(frozen=True)
class Decision:
    phase: Phase
    reason: Reason
    message: str
    updates: Mapping[str, Any] = field(default_factory=dict)  # other status fields


@dataclass(frozen=True)
class Sibling:
    name: str
    phase: Phase
    created: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Sibling:
        metadata = obj["metadata"]
        return cls(
            metadata["name"],
            parse_phase((obj.get("status") or {}).get("phase")),
            str(metadata.get("creationTimestamp", "")),
        )


def admit(
    me: Sibling, siblings: Sequence[Sibling], job_found: bool, problems: Sequence[str]
) -> Decision:
    """Where a Pending or Queued reconfiguration goes next."""
    if not job_found:
        return Decision(Phase.PENDING, Reason.JOB_NOT_FOUND, "waiting for the job to exist")
    if problems:
        return Decision(Phase.FAILED, Reason.INVALID, "; ".join(problems))
    others = [s for s in siblings if s.name != me.name]
    active = sorted(s.name for s in others if s.phase in ACTIVE)
    if active:
        return Decision(Phase.QUEUED, Reason.QUEUED, f"waiting for {active[0]} to finish")
    waiting = sorted(
        (s for s in [*others, me] if s.phase in WAITING), key=lambda s: (s.created, s.name)
    )
    head = waiting[0] if waiting else me
    if head.name != me.name:
        return Decision(Phase.QUEUED, Reason.QUEUED, f"queued behind {head.name}")
    return Decision(Phase.PLANNED, Reason.PLANNED, "planned; sending to the agent")


def plan_fields(document: Mapping[str, Any]) -> dict[str, Any]:
    """`status.plan` and `status.kind` from the agent's plan document: the plan the agent
    made and carries out is the one shown (the operator never plans for itself); {} when
    the document has none."""
    plan = document.get("plan")
    if not isinstance(plan, Mapping) or not plan:
        return {}
    return {"plan": dict(plan), "kind": plan.get("kind")}


def after_rejection(
    status: int, errors: Sequence[Mapping[str, str]], running: str | None
) -> Decision:
    lines = "; ".join(
        f"{e.get('field')}: {e.get('reason')}" if e.get("field") else str(e.get("reason"))
        for e in errors
    )
    if status == 409:
        # No plan in flight: the agent says why to retry (e.g. no placement reported yet).
        busy = f"the agent is applying {running}" if running else (lines or "the agent is busy")
        return Decision(Phase.QUEUED, Reason.AGENT_BUSY, busy)
    return Decision(Phase.FAILED, Reason.REJECTED, f"agent answered {status}: {lines}")


def from_agent_plan(document: Mapping[str, Any]) -> Decision:
    """The agent's plan document → phase, progress, timings and delay. Bins and steps are
    the driver's migration report as the agent relays it (what moved, not what a plan
    expected to move)."""
    agent_phase = document.get("phase")
    progress = document.get("progress") or {}
    done = agent_phase == "Completed"
    updates: dict[str, Any] = {
        "progress": Progress(
            workers_switched=int(progress.get("workersSwitched") or 0),
            workers_total=int(progress.get("workersTotal") or 0),
            bins_moved=int(progress.get("binsMoved") or 0),
            bins_total=int(progress.get("binsTotal") or 0),
            step=int(progress.get("step") or 0),
            steps=int(progress.get("steps") or 0),
            # The agent bounded it (HandOverStatus.latest): shown as the driver carried it out
            hand_over=list(progress.get("handOver") or ()),
            hand_overs=int(progress.get("handOvers") or 0),
        ),
        "delay_ms": document.get("delayMs"),  # in effect (jobs/agent/plans.py)
        "armed_ms": document.get("armedMs"),
    }
    timings = document.get("timings") or {}
    # Only the instants the status has (requestedAt is the object's creation): the agent's
    # document grows (propagatedAt), and an unknown key would fail every later status write.
    updates["timings"] = {k: v for k, v in timings.items() if k in AGENT_TIMINGS and v}
    if done:
        return Decision(Phase.COMPLETED, Reason.COMPLETED, "every target switched", updates)
    if agent_phase == "Failed":
        message = str(document.get("message") or "the agent reported the plan failed")
        return Decision(Phase.FAILED, Reason.PLAN_FAILED, message, updates)
    switched = f"{updates['progress'].workers_switched}/{updates['progress'].workers_total}"
    return Decision(Phase.APPLYING, Reason.APPLYING, f"workers switched {switched}", updates)


def _conditions(
    current: Sequence[Condition], decision: Decision, now: datetime, generation: int | None
) -> tuple[Condition, ...]:
    def condition(type_: str, status: ConditionStatus, message: str) -> Condition:
        return Condition(
            type=type_,
            status=status,
            reason=decision.reason.value,
            message=message,
            last_transition_time=now,
            observed_generation=generation,
        )

    if decision.phase is Phase.COMPLETED:
        succeeded, failed = ConditionStatus.TRUE, ConditionStatus.FALSE
    elif decision.phase is Phase.FAILED:
        succeeded, failed = ConditionStatus.FALSE, ConditionStatus.TRUE
    else:
        succeeded, failed = ConditionStatus.UNKNOWN, ConditionStatus.FALSE
    conditions = set_condition(current, condition("Succeeded", succeeded, decision.message))
    failed_message = decision.message if failed is ConditionStatus.TRUE else ""
    return set_condition(conditions, condition("Failed", failed, failed_message))


def apply_decision(
    current: ReconfigurationStatus,
    decision: Decision,
    *,
    now: datetime,
    generation: int | None,
    requested_at: datetime | None = None,
) -> ReconfigurationStatus:
    """The next status; raises IllegalTransitionError for a step the lifecycle does not have."""
    phase = transition(current.phase, decision.phase)
    updates = dict(decision.updates)
    timings = (current.timings or Timings()).model_dump()
    timings.update(updates.pop("timings", {}))
    if requested_at is not None and timings.get("requested_at") is None:
        timings["requested_at"] = requested_at
    if phase in FINAL_PHASES and timings.get("completed_at") is None:
        timings["completed_at"] = now
    status = current.model_copy(
        update={
            **updates,
            "phase": phase,
            "observed_generation": generation,
            "conditions": list(_conditions(current.conditions, decision, now, generation)),
            "message": decision.message,
        }
    )
    return ReconfigurationStatus.model_validate(
        {**status.model_dump(), "timings": _timings(timings)}
    )


def _timings(values: Mapping[str, Any]) -> Timings:
    aliases = {
        "requestedAt": "requested_at",
        "acceptedAt": "accepted_at",
        "firstSwitchAt": "first_switch_at",
        "lastSwitchAt": "last_switch_at",
        "inEffectAt": "in_effect_at",
        "completedAt": "completed_at",
    }
    return Timings.model_validate({aliases.get(k, k): v for k, v in values.items()})
