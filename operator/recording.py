"""What a completed Reconfiguration writes on its StreamJob: `lastReconfiguration`,
`liveGeneration`, `executors` (a rescale) and the job's `Reconfiguring` condition and
phase, with an Event and the delay metrics. Written with the result rather than left to the
next health tick (a queued sibling sets `Reconfiguring` again when it goes). The write goes
through the job's one status writer (`jobstatuses.py`), under the job's lock.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from swivel.api.conditions import Condition, ConditionStatus, set_condition
from swivel.api.reconfiguration import ReconfigurationStatus
from swivel.api.streamjob import JobPhase, LastReconfiguration, StreamJobStatus
from swivel.operator import events, metrics
from swivel.operator.contexts import OperatorContext
from swivel.operator.jobstatuses import freshest, job_lock, write_job_status


async def record_on_job(
    ctx: OperatorContext,
    name: str,
    *,
    status: ReconfigurationStatus,
    spec: Mapping[str, Any],
    job_body: Mapping[str, Any],
    document: Mapping[str, Any],
) -> None:
    """`name` completed with `status` (the agent's plan `document`): one status write on
    the job (remembered, so the next step of a sibling plans on it before the watch says),
    computed from the job's freshest status under its lock (the health timer also writes
    conditions and phase)."""
    timings = status.timings
    last = LastReconfiguration(
        name=name,
        kind=status.kind or "unknown",
        delay_ms=status.delay_ms,
        completed_at=timings.completed_at if timings else None,
    )
    async with job_lock(ctx, job_body):
        update: dict[str, Any] = {
            "lastReconfiguration": last.to_manifest(),
            **_idle(freshest(ctx, job_body), name, ctx.clock()),
        }
        if document.get("configVersion") is not None:
            update["liveGeneration"] = int(document["configVersion"])
        rescale = spec.get("rescale") or {}
        if rescale.get("executors"):
            update["executors"] = int(rescale["executors"])
        await write_job_status(ctx, job_body, update)
    events.emit(job_body, "ReconfigurationCompleted", f"{name} ({last.kind}) completed")
    if timings and timings.requested_at and timings.completed_at:
        waited = (timings.completed_at - timings.requested_at).total_seconds()
        metrics.RECONFIGURATION_DELAY.labels(last.kind).observe(max(waited, 0.0))
    if status.delay_ms is not None:
        metrics.AGENT_DELAY.labels(last.kind).observe(status.delay_ms / 1000)


def _idle(job_body: Mapping[str, Any], name: str, now: datetime) -> dict[str, Any]:
    """The job's `Reconfiguring` condition (False, Idle) and phase (Running again)."""
    try:
        status = StreamJobStatus.model_validate(job_body.get("status") or {})
    except ValidationError:
        return {}
    idle = Condition(
        type="Reconfiguring",
        status=ConditionStatus.FALSE,
        reason="Idle",
        message=f"{name} completed",
        last_transition_time=now,
        observed_generation=status.observed_generation,
    )
    conditions = set_condition(status.conditions, idle)
    update: dict[str, Any] = {"conditions": [c.to_manifest() for c in conditions]}
    if status.phase is JobPhase.RECONFIGURING:
        update["phase"] = JobPhase.RUNNING.value
    return update
