"""kopf handlers for Reconfiguration: validate, queue, plan, submit, follow — resumably.

Each run of `step` reads the object, its job and its siblings as the watch showed them
(`indexes`: no API round trip before the submit) and carries it as far as it can go now:
Pending/Queued → (admission) → submitted → Applying (the agent's plan id in the
`swivel.dev/agent-plan-id` annotation, written before the phase; the plan in status) →
polled → Completed | Failed. A restarted operator finds the phase and the annotation and
carries on; a plan is never submitted twice: Applying never submits, a Planned object with
the annotation is moved on to Applying, a 409 whose running plan has our name is adopted,
and a resubmission carries the idempotency key. Status is written straight away through
the `Cluster` (not at the end of the handler); what follows an acceptance waits until no
other step is on its way to a submit (`contexts.Submissions`: submits first in a burst).

The writes a step makes go through `Step` (operator/reconfiguration_steps.py); the kopf
daemon that runs a step until the object settles is in operator/reconfiguration_following.py.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import kopf
from pydantic import ValidationError

from swivel.api.base import API_GROUP, API_VERSION
from swivel.api.errors import SpecError, problems_from
from swivel.api.functions import spec_problems
from swivel.api.phases import FINAL_PHASES
from swivel.api.reconfiguration import (
    ReconfigurationSpec,
    validate_against_job,
)
from swivel.api.streamjob import StreamJob
from swivel.operator import metrics
from swivel.operator.admission import (
    RECONFIGURATION_SPEC_DEPTH,
    spec_bound_problem,
    unknown_targets,
)
from swivel.operator.agents import AgentRejected, AgentUnreachable, JobAddress
from swivel.operator.clusters import Ref
from swivel.operator.contexts import OperatorContext
from swivel.operator.joblabels import reconfigurations_of
from swivel.operator.phases import WAITING, Phase, Reason
from swivel.operator.reconciling import (
    Decision,
    Sibling,
    admit,
    after_rejection,
    from_agent_plan,
    plan_fields,
)
from swivel.operator.reconfiguration_steps import Step
from swivel.operator.recording import record_on_job

PLURAL = "reconfigurations"
RESOURCE = (API_GROUP, API_VERSION, PLURAL)
CRD_VERSION = f"{API_GROUP}/{API_VERSION}"
# How long one step waits on the agent for a plan to change (its long-poll; the agent caps
# it at 30 s). Short enough that a stopping operator is not held long, long enough that a
# step sees most changes as they happen rather than at the next one.
PLAN_WAIT_S = 10.0
T = TypeVar("T")


async def step(ctx: OperatorContext, namespace: str, name: str, job_name: str = "") -> bool:
    """Carry one Reconfiguration as far as it can go now (idempotent); True once there is
    nothing left to do (Completed, Failed, deleted). With its `job_name` (`spec.jobRef.name`) the
    object, its job and its siblings come from the watch (`indexes`), not the API server."""
    async with ctx.lock(f"reconfiguration/{namespace}/{name}"):
        obj = ctx.known.reconfiguration(namespace, name, job_name) if job_name else None
        if obj is None:  # finished, deleted, not indexed yet, or another jobRef
            obj = await ctx.cluster.get(Ref(CRD_VERSION, "Reconfiguration", namespace, name))
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return True
        metrics.RECONCILES.labels("reconfiguration", "step").inc()
        current = Step(ctx, obj)
        if current.status.phase in FINAL_PHASES:
            return True
        too_deep = spec_bound_problem(obj.get("spec"), RECONFIGURATION_SPEC_DEPTH)
        if too_deep is not None:  # the agent would refuse the body, naming no field
            await current.decide(Decision(Phase.FAILED, Reason.INVALID, str(too_deep)))
            return True
        try:
            spec = ReconfigurationSpec.model_validate(obj.get("spec") or {})
        except ValidationError as error:
            problems = "; ".join(str(p) for p in problems_from(error, "spec"))
            await current.decide(Decision(Phase.FAILED, Reason.INVALID, problems))
            return True
        refused = spec_problems(spec)  # functions outside the installation's allow-list
        if refused:
            message = "; ".join(str(p) for p in refused)
            await current.decide(Decision(Phase.FAILED, Reason.INVALID, message))
            return True
        job_body = await _job_body(ctx, namespace, spec.job_ref.name)
        job = _parse_job(job_body)
        admitted = False
        if current.status.phase in WAITING or current.status.phase is Phase.PLANNED:
            async with ctx.submissions.submitting():
                if current.status.phase in WAITING:
                    admitted = await _admit(current, spec, job_body, job)
                    if not admitted:
                        return current.status.phase in FINAL_PHASES
                document = await _submit(current, spec, job_body, admitted)
            if document is not None:
                await ctx.submissions.settled()  # other objects' submits first
                await _accepted(current, spec, document)
        if current.status.phase is Phase.APPLYING:
            await _follow(current, job_body)
    if current.status.phase not in FINAL_PHASES:
        return False
    await _wake_next(ctx, namespace, spec.job_ref.name, name)
    return True


def idempotency_key(obj: Mapping[str, Any]) -> str:
    """What the agent knows this Reconfiguration by across retries and operator restarts:
    a repeat gets the plan the first submission created (no double apply even when the
    operator crashed before it could record the plan id). The uid keeps a re-created
    object of the same name a different reconfiguration."""
    metadata = obj["metadata"]
    return f"{metadata['namespace']}/{metadata['name']}/{metadata['uid']}"


async def _job_body(ctx: OperatorContext, namespace: str, name: str) -> dict[str, Any] | None:
    """The StreamJob as the watch showed it (or as the operator last wrote it); read from
    the API server when the index does not have it (created a moment ago, or deleted)."""
    known = ctx.known.job(namespace, name)
    if known is not None:
        return known
    return await ctx.cluster.get(Ref(CRD_VERSION, "StreamJob", namespace, name))


def _parse_job(body: Mapping[str, Any] | None) -> StreamJob | SpecError | None:
    if body is None:
        return None
    try:
        return StreamJob.model_validate({"metadata": dict(body["metadata"]), "spec": body["spec"]})
    except ValidationError as error:
        return SpecError(problems_from(error, "spec"))


async def _siblings(ctx: OperatorContext, namespace: str, job: str) -> list[Sibling]:
    return [Sibling.of(i) for i in await reconfigurations_of(ctx, namespace, job)]


async def _admit(
    current: Step,
    spec: ReconfigurationSpec,
    job_body: Mapping[str, Any] | None,
    job: StreamJob | SpecError | None,
) -> bool:
    """Pending/Queued → Pending (no job) | Failed (invalid) | Queued, written, and False;
    or True when this one may go now, not written: `_submit` writes Planned or Applying
    with the agent's answer and plan (one status write instead of two; the object is the
    head of its job's queue, so its siblings keep waiting meanwhile)."""
    if isinstance(job, SpecError):
        message = f"StreamJob {spec.job_ref.name} is invalid: {job}"
        await current.decide(Decision(Phase.PENDING, Reason.JOB_INVALID, message))
        return False
    problems: list[str] = []
    if job is not None and job_body is not None:
        try:
            validate_against_job(spec, job.spec)
        except SpecError as error:
            problems = [str(p) for p in error.problems]
        problems += [str(p) for p in unknown_targets(spec, job.spec, job_body.get("status"))]
    namespace = current.ref.namespace
    me = Sibling.of(current.obj)
    siblings = await _siblings(current.ctx, namespace, spec.job_ref.name)
    decision = admit(me, siblings, job is not None, problems)
    if decision.reason is Reason.JOB_NOT_FOUND:
        decision = Decision(
            Phase.PENDING,
            Reason.JOB_NOT_FOUND,
            f"spec.jobRef.name: StreamJob {spec.job_ref.name!r} not found in {namespace}; "
            "waiting for it",
        )
    if decision.phase is not Phase.PLANNED:
        await current.decide(decision)
        return False
    return True


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


async def _submit(
    current: Step,
    spec: ReconfigurationSpec,
    job_body: Mapping[str, Any] | None,
    admitted: bool = False,
) -> dict[str, Any] | None:
    """Planned (or just `admitted`): the agent's plan document when it accepted (`_accepted`
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


async def _accepted(current: Step, spec: ReconfigurationSpec, document: Mapping[str, Any]) -> None:
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


async def _follow(current: Step, job_body: Mapping[str, Any] | None) -> None:
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
        await record_on_job(
            current.ctx,
            current.name,
            status=current.status,
            spec=spec,
            job_body=job_body,
            document=document,
        )


async def _wake_next(ctx: OperatorContext, namespace: str, job: str, finished: str) -> None:
    """Let the next queued reconfiguration of the job go now, not at its next timer run."""
    waiting = [s for s in await _siblings(ctx, namespace, job) if s.phase in WAITING]
    waiting.sort(key=lambda s: (s.created, s.name))
    if waiting and waiting[0].name != finished:
        await step(ctx, namespace, waiting[0].name, job)
