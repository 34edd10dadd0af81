"""A StreamJob's observed state → its status (pure): phase, conditions with reasons.

| observed                                               | Ready | Degraded | reason           |
|--------------------------------------------------------|-------|----------|------------------|
| spec does not validate                                 | False | True     | InvalidSpec      |
| no driver pod yet, or it is Pending                    | False | False    | DriverPending    |
| the old driver pod is stopping for a restart           | False | False    | Restarting       |
| driver pod Failed, or the Spark container crash-loops  | False | True     | QueryFailed      |
| pod running, agent does not answer                     | False | True     | AgentUnreachable |
| agent answers, the driver has not reported a batch yet | False | False    | DriverStarting   |
| agent ready                                            | True  | False    | Running          |

`Reconfiguring` is True while a Reconfiguration of the job is Planned or Applying.

`PrewarmReady` says whether `spec.migration.prewarm` can load bins ahead on every executor,
from the driver's check once the query has committed a batch with state (the agent's
`prewarmCheck`; docs/migration.md, "Answers over RPC"): True (`HelperAnswered`), False
(`HelperUnanswered`: the executors that did not answer, and why; their bins move the plain
way), Unknown (`NotChecked`, `NoExecutors`). Left as it was while the agent does not answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from swivel.api.conditions import Condition, ConditionStatus, set_condition
from swivel.api.streamjob import JobPhase, LiveOperatorConfig, StreamJobStatus
from swivel.controllers.assignments import bins_per_executor
from swivel.controllers.planning import assumed_assignment
from swivel.operator.agents import AgentHealth
from swivel.protocol.bodies import PrewarmCheck

CRASH_REASONS = frozenset({"CrashLoopBackOff", "Error", "OOMKilled"})
NAMED = 5  # executors a PrewarmReady message names (then: and N more)


@dataclass(frozen=True)
class JobObservation:
    generation: int
    bins: int
    desired_executors: int
    pod: Mapping[str, Any] | None
    health: AgentHealth | None
    agent_error: str | None
    reconfiguring: str | None = None  # "name (phase)" of the active Reconfiguration
    invalid: str | None = None


@dataclass(frozen=True)
class Verdict:
    phase: JobPhase
    ready: bool
    degraded: bool
    reason: str
    message: str


def judge(observation: JobObservation) -> Verdict:
    o = observation
    if o.invalid is not None:
        return Verdict(JobPhase.FAILED, False, True, "InvalidSpec", o.invalid)
    pod = o.pod
    if pod is None:
        return Verdict(JobPhase.PENDING, False, False, "DriverPending", "no driver pod yet")
    if pod["metadata"].get("deletionTimestamp"):
        return Verdict(
            JobPhase.RESTARTING, False, False, "Restarting", "the old driver is stopping"
        )
    pod_phase = (pod.get("status") or {}).get("phase") or "Pending"
    crashed = _crash(pod)
    if pod_phase == "Failed" or crashed:
        why = crashed or f"driver pod {pod_phase}"
        return Verdict(JobPhase.DEGRADED, False, True, "QueryFailed", why)
    if pod_phase != "Running":
        return Verdict(JobPhase.STARTING, False, False, "DriverPending", f"driver pod {pod_phase}")
    if o.health is None:
        message = o.agent_error or "the agent does not answer"
        return Verdict(JobPhase.DEGRADED, False, True, "AgentUnreachable", message)
    if not o.health.ready:
        message = o.health.message or "waiting for the driver's first batch"
        return Verdict(JobPhase.STARTING, False, False, "DriverStarting", message)
    unready = _unready_containers(pod)
    if unready:  # Ready means what `kubectl get pod` shows too: every container ready
        message = f"driver containers not ready yet: {', '.join(unready)}"
        return Verdict(JobPhase.STARTING, False, False, "ContainersNotReady", message)
    phase = JobPhase.RECONFIGURING if o.reconfiguring else JobPhase.RUNNING
    return Verdict(phase, True, False, "Running", "the query runs and the agent is ready")


def _unready_containers(pod: Mapping[str, Any]) -> list[str]:
    """The driver pod's containers its kubelet does not report ready (by readiness probe):
    the agent can answer the operator before the kubelet's probe has seen it."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return sorted(str(c.get("name")) for c in statuses if not c.get("ready", True))


def _crash(pod: Mapping[str, Any]) -> str | None:
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        if container.get("name") != "spark":
            continue
        state = container.get("state") or {}
        waiting = (state.get("waiting") or {}).get("reason")
        terminated = state.get("terminated") or {}
        if waiting in CRASH_REASONS:
            return f"spark container {waiting} (restarts: {container.get('restartCount', 0)})"
        if terminated and terminated.get("exitCode", 0) != 0:
            return f"spark container exited {terminated.get('exitCode')}: {terminated.get('reason', '')}"
    return None


def _condition(
    type_: str, status: bool, reason: str, message: str, *, now: datetime, generation: int
) -> Condition:
    return Condition(
        type=type_,
        status=ConditionStatus.TRUE if status else ConditionStatus.FALSE,
        reason=reason,
        message=message,
        last_transition_time=now,
        observed_generation=generation,
    )


def next_status(
    current: StreamJobStatus, observation: JobObservation, now: datetime
) -> StreamJobStatus:
    verdict = judge(observation)
    generation = current.observed_generation or observation.generation
    conditions = tuple(current.conditions)
    reconfiguring = observation.reconfiguring
    for condition in (
        _condition(
            "Ready", verdict.ready, verdict.reason, verdict.message, now=now, generation=generation
        ),
        _condition(
            "Degraded",
            verdict.degraded,
            verdict.reason if verdict.degraded else "AsExpected",
            verdict.message if verdict.degraded else "",
            now=now,
            generation=generation,
        ),
        _condition(
            "Reconfiguring",
            reconfiguring is not None,
            "Applying" if reconfiguring else "Idle",
            reconfiguring or "",
            now=now,
            generation=generation,
        ),
    ):
        conditions = set_condition(conditions, condition)
    if observation.health is not None:
        prewarm = prewarm_condition(observation.health.prewarm_check, now, generation)
        conditions = set_condition(conditions, prewarm)
    executors = current.executors or observation.desired_executors
    health = observation.health
    update: dict[str, Any] = {
        "phase": verdict.phase,
        "conditions": list(conditions),
        "executors": executors,
        "bins_per_executor": bins_per_executor(assumed_assignment(observation.bins, executors)),
    }
    if health is not None:
        update["live_generation"] = health.config_version
        update["operators"] = [
            LiveOperatorConfig(
                operator=name,
                function=config.get("function"),
                version=int(config.get("version") or 0),
            )
            for name, config in sorted(health.operators.items())
        ]
    return current.model_copy(update=update)


def prewarm_condition(check: PrewarmCheck | None, now: datetime, generation: int) -> Condition:
    """`PrewarmReady` from the driver's last prewarm check (the module's docstring)."""
    if check is None:
        status, reason = ConditionStatus.UNKNOWN, "NotChecked"
        message = (
            "no prewarm check reported yet: the driver checks once the query has committed a "
            "batch with state (a stateless query, or a session without the helper jar, has none)"
        )
    elif not check.executors:
        status, reason = ConditionStatus.UNKNOWN, "NoExecutors"
        message = "the prewarm check found no live executor"
    elif check.unanswered:
        status, reason = ConditionStatus.FALSE, "HelperUnanswered"
        unanswered = list(check.unanswered.items())
        named = "; ".join(f"executor {e}: {why[:200]}" for e, why in unanswered[:NAMED])
        more = f" and {len(unanswered) - NAMED} more" if len(unanswered) > NAMED else ""
        message = (
            f"{named}{more}. spec.migration.prewarm moves their bins the plain way "
            "(reloaded in the batch after the switch)."
        )
    else:
        status, reason = ConditionStatus.TRUE, "HelperAnswered"
        message = f"the prewarm helper answered on every executor ({len(check.executors)})"
    return Condition(
        type="PrewarmReady",
        status=status,
        reason=reason,
        message=message,
        last_transition_time=now,
        observed_generation=generation,
    )
