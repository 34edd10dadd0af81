"""One step's hold on a Reconfiguration, its conversation with the job's agent, and every
write it makes.

`Step` is what every stage of `reconfigurations.step` writes through: `decide` turns a
`Decision` into the new status (`reconciling.apply_decision`), patches it straight away,
posts an Event when the phase or the reason changes and counts finished ones in the
metrics; `remember_plan_id` writes the agent's plan id annotation. The stages that talk to
the agent are here too, since each of their outcomes is such a write: `submit` (with the
idempotency key, adopting a 409 whose running plan is this very object), `record_acceptance`
(Applying, with the agent's plan in status) and `follow_plan` (its long-poll), which, once
the plan is Completed, records the result on the StreamJob: `lastReconfiguration`,
`liveGeneration`, `executors` (a rescale) and the job's `Reconfiguring` condition and phase,
with an Event and the delay metrics. That is written with the result rather than left to
the next health tick (a queued sibling sets `Reconfiguring` again when it goes), through the
job's one status writer (`jobstatuses.py`), under the job's lock. So the one writer of a
Reconfiguration's status, Events and metrics can be read (and kept single-writer) in one
module; validation, the queue and kopf's daemon are in operator/reconfigurations.py.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any, TypeVar

import kopf
from pydantic import ValidationError

from swivel.api.base import API_GROUP
from swivel.api.conditions import Condition, ConditionStatus, set_condition
from swivel.api.phases import FINAL_PHASES
from swivel.api.reconfiguration import ReconfigurationSpec, ReconfigurationStatus
from swivel.api.streamjob import JobPhase, LastReconfiguration, StreamJobStatus
from swivel.operator import events, metrics
from swivel.operator.agents import AgentRejected, AgentUnreachable, JobAddress
from swivel.operator.clusters import Ref
from swivel.operator.contexts import OperatorContext
from swivel.operator.joblabels import missing_job_label
from swivel.operator.jobstatuses import freshest, job_lock, write_job_status
from swivel.operator.phases import Phase, Reason
from swivel.operator.reconciling import (
    Decision,
    after_rejection,
    apply_decision,
    from_agent_plan,
    plan_fields,
)

PLAN_ID_ANNOTATION = f"{API_GROUP}/agent-plan-id"
# How long one step waits on the agent for a plan to change (its long-poll; the agent caps
# it at 30 s). Short enough that a stopping operator is not held long, long enough that a
# step sees most changes as they happen rather than at the next one.
PLAN_WAIT_S = 10.0
T = TypeVar("T")


class Step:
    """One run over one Reconfiguration: its fresh body, and writing decisions back."""

    def __init__(self, ctx: OperatorContext, obj: dict[str, Any]) -> None:
        self.ctx, self.obj = ctx, obj
        self.ref = Ref.of(obj)
        metadata = obj["metadata"]
        self.generation = metadata.get("generation")
        try:
            self.status = ReconfigurationStatus.model_validate(obj.get("status") or {})
        except ValidationError:
            self.status = ReconfigurationStatus()

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def plan_id(self) -> str | None:
        annotated = (self.obj["metadata"].get("annotations") or {}).get(PLAN_ID_ANNOTATION)
        return annotated or self.status.agent_plan_id

    async def decide(self, decision: Decision) -> None:
        before = self.status
        created = self.obj["metadata"].get("creationTimestamp")
        after = apply_decision(
            before,
            decision,
            now=self.ctx.clock(),
            generation=self.generation,
            requested_at=datetime.fromisoformat(created) if created else None,
        )
        if after.to_manifest() == before.to_manifest():
            return
        self.obj = await self.ctx.cluster.patch(
            self.ref, {"status": after.to_manifest()}, status=True
        )
        self.ctx.known.wrote(self.obj)
        self.status = after
        if before.phase is not after.phase or _reason(before) != decision.reason.value:
            warning = after.phase is Phase.FAILED or decision.reason is Reason.AGENT_UNREACHABLE
            events.emit(self.obj, decision.reason.value, decision.message, warning=warning)
        if after.phase in FINAL_PHASES and before.phase not in FINAL_PHASES:
            kind = after.kind or "unknown"
            metrics.RECONFIGURATIONS.labels(after.phase.value, kind).inc()
            if after.phase is Phase.FAILED:
                metrics.FAILURES.labels("reconfiguration", decision.reason.value).inc()

    async def remember_plan_id(self, plan_id: str, job: str) -> None:
        """The plan id annotation, and the job label if missing: one metadata write."""
        metadata: dict[str, Any] = {"annotations": {PLAN_ID_ANNOTATION: plan_id}}
        labels = missing_job_label(self.obj, job)
        if labels:
            metadata["labels"] = labels
        self.obj = await self.ctx.cluster.patch(self.ref, {"metadata": metadata})
        self.ctx.known.wrote(self.obj)


def _reason(status: ReconfigurationStatus) -> str | None:
    """The reason of the last decision (its `Succeeded` condition): an Event is posted when
    the phase or the reason changes, not for every new progress message."""
    for condition in status.conditions:
        if condition.type == "Succeeded":
            return condition.reason
    return None


def idempotency_key(obj: Mapping[str, Any]) -> str:
    """What the agent knows this Reconfiguration by across retries and operator restarts:
    a repeat gets the plan the first submission created (no double apply even when the
    operator crashed before it could record the plan id). The uid keeps a re-created
    object of the same name a different reconfiguration."""
    metadata = obj["metadata"]
    return f"{metadata['namespace']}/{metadata['name']}/{metadata['uid']}"


async def _address(
    current: Step, job_body: Mapping[str, Any] | None, admitted: bool = False
) -> JobAddress | None:
    if job_body is None:
        await current.decide(
            Decision(Phase.FAILED, Reason.JOB_DELETED, "the StreamJob was deleted")
        )
        return None
    metadata = job_body["metadata"]
    address = await current.ctx.job_address(
        current.ref.namespace, metadata["name"], metadata.get("uid")
    )
    if address is None:
        message = "the job's agent token Secret does not exist yet"
        phase = Phase.PLANNED if admitted else current.status.phase
        await current.decide(Decision(phase, Reason.AGENT_UNREACHABLE, message))
    return address


async def _calling(
    current: Step, address: JobAddress, call: Callable[[JobAddress], Awaitable[T]]
) -> T:
    """`call(address)`; after a 401 with a remembered token, once more with the Secret's."""
    try:
        return await call(address)
    except AgentRejected as error:
        if error.status != 401:
            raise
        fresh = await current.ctx.job_address(address.namespace, address.name, fresh=True)
        if fresh is None or fresh.token == address.token:
            raise
        return await call(fresh)


async def submit(
    current: Step,
    spec: ReconfigurationSpec,
    job_body: Mapping[str, Any] | None,
    admitted: bool = False,
) -> dict[str, Any] | None:
    """Planned (or just `admitted`): the agent's plan document when it accepted (`record_acceptance`
    records it); otherwise → Planned (agent unreachable) | Queued (busy) | Failed (rejected:
    the agent's `field: reason`), or Applying when resumed, and None."""
    if current.plan_id:  # accepted before a restart; the phase write did not happen
        updates = {"agent_plan_id": current.plan_id}
        await current.decide(Decision(Phase.APPLYING, Reason.APPLYING, "resumed", updates))
        return None
    address = await _address(current, job_body, admitted)
    if address is None:
        return None
    agents, manifest, key = current.ctx.agents, spec.to_manifest(), idempotency_key(current.obj)
    try:
        document = await _calling(
            current, address, lambda at: agents.submit(at, current.name, manifest, key=key)
        )
    except AgentUnreachable as error:
        await current.decide(Decision(Phase.PLANNED, Reason.AGENT_UNREACHABLE, str(error)))
        return None
    except AgentRejected as error:
        adopted = await _ours(current, address, error)
        if adopted is None:
            await current.decide(after_rejection(error.status, error.errors, error.running_plan))
            return None
        document = adopted
    return document


async def record_acceptance(
    current: Step, spec: ReconfigurationSpec, document: Mapping[str, Any]
) -> None:
    """The agent accepted `document` → Applying, with the agent's plan in status."""
    # The annotation first (a metadata write, before anything else can happen), then the
    # status with the same id: a restart in between finds the annotation (and a crash
    # before the annotation is harmless: the idempotency key gets the same plan back).
    await current.remember_plan_id(str(document["id"]), spec.job_ref.name)
    decision = from_agent_plan(document)
    fields = plan_fields(document)
    message = f"the agent accepted plan {document['id']}"
    if fields:
        message = f"planned by the agent ({fields.get('kind')}); {message}"
    updates = {**fields, **decision.updates, "agent_plan_id": str(document["id"])}
    await current.decide(Decision(Phase.APPLYING, Reason.APPLYING, message, updates))


async def _ours(current: Step, address: JobAddress, error: AgentRejected) -> dict[str, Any] | None:
    """A 409 whose running plan is this very Reconfiguration (submitted before a crash)."""
    if error.status != 409 or not error.running_plan:
        return None
    try:
        running = await current.ctx.agents.get_plan(address, str(error.running_plan))
    except (AgentRejected, AgentUnreachable):
        return None
    return running if running.get("name") == current.name else None


async def follow_plan(current: Step, job_body: Mapping[str, Any] | None) -> None:
    """Record the agent's plan now, then follow it by long-poll: ask again with the
    `revision` just seen and wait (up to `PLAN_WAIT_S`) for the agent to say it changed, so
    a completion is seen when it happens, not at the next step. An agent whose documents
    carry no `revision` (or a plan already final) is asked once, as before."""
    plan_id = current.plan_id
    if not plan_id:
        message = "no agent plan id recorded; cannot follow"
        await current.decide(Decision(Phase.FAILED, Reason.PLAN_LOST, message))
        return
    address = await _address(current, job_body)
    if address is None:
        return
    document = await _plan(current, address, plan_id, None)
    if document is None:
        return
    await _take(current, document, job_body)
    revision = document.get("revision")
    if current.status.phase in FINAL_PHASES or not isinstance(revision, int):
        return
    changed = await _plan(current, address, plan_id, revision)
    if changed is not None and changed.get("revision") != revision:
        await _take(current, changed, job_body)


async def _plan(
    current: Step, address: JobAddress, plan_id: str, since: int | None
) -> dict[str, Any] | None:
    """The agent's plan document (with `since`, its next change or the same after
    `PLAN_WAIT_S`); None once the failure to get it is recorded."""
    agents = current.ctx.agents
    timeout = 0.0 if since is None else PLAN_WAIT_S
    try:
        return await _calling(
            current, address, lambda at: agents.get_plan(at, plan_id, since=since, timeout=timeout)
        )
    except AgentUnreachable as error:
        await current.decide(Decision(Phase.APPLYING, Reason.AGENT_UNREACHABLE, str(error)))
        return None
    except AgentRejected as error:
        if error.status != 404:
            raise kopf.TemporaryError(str(error), delay=5) from error
        message = f"the agent no longer knows plan {plan_id} (its state was lost)"
        await current.decide(Decision(Phase.FAILED, Reason.PLAN_LOST, message))
        return None


async def _take(
    current: Step, document: Mapping[str, Any], job_body: Mapping[str, Any] | None
) -> None:
    """Write what the agent's plan document says into status (and, once Completed, the
    job's last reconfiguration)."""
    decision = from_agent_plan(document)
    if current.status.plan is None:  # accepted, then a restart before the status write
        decision = Decision(
            decision.phase,
            decision.reason,
            decision.message,
            {**plan_fields(document), **decision.updates},
        )
    await current.decide(decision)
    if decision.phase is Phase.COMPLETED and job_body is not None:
        spec = current.obj.get("spec") or {}
        await _record_on_job(
            current.ctx,
            current.name,
            status=current.status,
            spec=spec,
            job_body=job_body,
            document=document,
        )


async def _record_on_job(
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
