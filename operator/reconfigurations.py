"""kopf's followers of Reconfigurations, and one step: validate, queue, submit, follow.

Every StreamJob has a kopf daemon (`reconfiguration_followers`) that follows the job's
unfinished Reconfigurations: one `follow` task per object, started when kopf's index shows
it, which runs `step` now and then every `intervals.reconfiguration` seconds until the
step says there is nothing left to do. A Reconfiguration's watch event wakes its job's
daemon (`reconfiguration_seen`, a kopf event handler), so a new one is stepped at once.
kopf owns the daemon's lifetime, and so the tasks' (they are its children): it stops them
when the job is deleted (its unfinished Reconfigurations then fail, `JobDeleted`), when
the operator stops and while peering pauses the operator, and starts them again on the
next watch event after the pause; an operator that starts finds every unfinished one by
its listing, which is how it resumes. A Reconfiguration whose job no daemon follows (the
job does not exist yet) is stepped from its own event: it waits as Pending (`JobNotFound`).

Why a daemon per job and not per Reconfiguration: kopf blocks the deletion of an object
with a daemon or timer by its finalizer (its maintainers keep that guarantee for every
daemon, nolar/kopf#896), one patch when the daemon starts and one when it has finished,
each with a watch event. On every Reconfiguration that doubled the operator's reaction to
a burst of 100 applied at once (p50 0.43 -> 1.13 s, operator CPU 20 -> 32 ms per
Reconfiguration, measured side by side; docs/operator.md). A StreamJob carries kopf's
finalizer anyway (its deletion handler), and a job's Reconfigurations run one at a time.

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

The writes a step makes, and its calls to the agent, go through `Step`
(operator/reconfiguration_steps.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

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
from swivel.operator import metrics, streamjobs
from swivel.operator.admission import (
    RECONFIGURATION_SPEC_DEPTH,
    spec_bound_problem,
    unknown_targets,
)
from swivel.operator.clusters import Ref
from swivel.operator.contexts import OperatorContext
from swivel.operator.indexes import job_of
from swivel.operator.joblabels import reconfigurations_of
from swivel.operator.phases import WAITING, Phase, Reason
from swivel.operator.reconciling import Decision, Sibling, admit
from swivel.operator.reconfiguration_steps import (
    Step,
    follow_plan,
    record_acceptance,
    submit,
)

PLURAL = "reconfigurations"
RESOURCE = (API_GROUP, API_VERSION, PLURAL)
CRD_VERSION = f"{API_GROUP}/{API_VERSION}"

FAILED_STEP_DELAY_S = 5.0
# When kopf stops a daemon (the object finished or was deleted, the operator stops or
# peering pauses it), a step under way may finish for this long: the daemon that wrote
# Completed is stopped by the `when=` filter while it still records the result on the job
# and wakes the next queued sibling, which a cancellation would cut short. Only then is it
# cancelled (a step is resumable at any await: it survives operator crashes); without a
# timeout kopf would wait for ever and leave it orphaned. Deleting an unfinished
# Reconfiguration therefore takes up to this long (kopf looks again after the backoff).
CANCELLATION_BACKOFF_S = 5.0
CANCELLATION_TIMEOUT_S = 5.0
logger = logging.getLogger(__name__)


async def follow(
    ctx: OperatorContext, namespace: str, name: str, job: str, stopped: kopf.DaemonStopped
) -> None:
    """Step one unfinished Reconfiguration now and then every `intervals.reconfiguration`
    seconds until it settles, is deleted, or kopf stops its job's daemon (`stopped`)."""
    while not stopped:
        try:
            if await step(ctx, namespace, name, job):
                return
            delay = ctx.intervals.reconfiguration
        except kopf.TemporaryError as error:
            delay = error.delay or ctx.intervals.reconfiguration
        except Exception:  # logged; the next run retries, as a timer would
            logger.exception("Reconfiguration %s/%s: step failed", namespace, name)
            delay = FAILED_STEP_DELAY_S
        # Not `await stopped.wait(delay)`: kopf waits for that in a task of its own, which
        # outlives a daemon cancelled meanwhile and, when its timeout fires in the same
        # instant (Python 3.11's wait_for), ends in a TimeoutError that kopf's shutdown
        # re-raises out of kopf.operator. A stopped daemon exits after this sleep, or
        # kopf cancels it after CANCELLATION_BACKOFF_S (harmless in a sleep).
        await asyncio.sleep(delay)


async def follow_job(
    ctx: OperatorContext, namespace: str, job: str, stopped: kopf.DaemonStopped
) -> None:
    """The body of a StreamJob's daemon: one `follow` task per unfinished Reconfiguration of
    the job, started when the job's index shows it (woken by `reconfiguration_seen`, or
    every `intervals.reconfiguration` seconds). The tasks are the daemon's children: kopf
    stopping or cancelling the daemon stops or cancels them."""
    key = (namespace, job)
    wake = ctx.followed_jobs[key] = asyncio.Event()
    following: dict[str, asyncio.Task[None]] = {}
    try:
        async with asyncio.TaskGroup() as group:
            while not stopped:
                wake.clear()
                for name in [n for n, t in following.items() if t.done()]:
                    del following[name]
                for obj in await reconfigurations_of(ctx, namespace, job):
                    name = str(obj["metadata"]["name"])
                    if name not in following:
                        following[name] = group.create_task(
                            follow(ctx, namespace, name, job, stopped),
                            name=f"reconfiguration/{namespace}/{name}",
                        )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), ctx.intervals.reconfiguration)
    finally:
        if ctx.followed_jobs.get(key) is wake:
            del ctx.followed_jobs[key]
    reason = stopped.reason
    if reason is not None and reason & kopf.DaemonStoppingReason.RESOURCE_DELETED:
        await _fail_with_job(ctx, namespace, job)


async def _fail_with_job(ctx: OperatorContext, namespace: str, job: str) -> None:
    """The job is being deleted: its unfinished Reconfigurations fail (`JobDeleted`)."""
    for obj in await reconfigurations_of(ctx, namespace, job):
        name = str(obj["metadata"]["name"])
        async with ctx.lock(f"reconfiguration/{namespace}/{name}"):
            current = Step(ctx, obj)
            if current.status.phase not in FINAL_PHASES:
                message = f"the StreamJob {job} was deleted"
                await current.decide(Decision(Phase.FAILED, Reason.JOB_DELETED, message))


async def _step_alone(ctx: OperatorContext, namespace: str, name: str, job: str) -> None:
    """A step from the watch event, for a Reconfiguration whose job no daemon follows (the
    job does not exist yet, or its daemon has not started): it writes Pending
    (`JobNotFound`), Failed, or goes as far as it can; the job's daemon takes it from there."""
    try:
        await step(ctx, namespace, name, job)
    except kopf.TemporaryError as error:
        logger.info("Reconfiguration %s/%s: %s", namespace, name, error)
    except Exception:  # logged; its next event, or the job's daemon, steps it again
        logger.exception("Reconfiguration %s/%s: step failed", namespace, name)


def register(registry: kopf.OperatorRegistry, ctx: OperatorContext) -> None:
    @kopf.on.event(*RESOURCE, registry=registry)
    async def reconfiguration_seen(
        type: str | None,  # kopf passes the event type by this name
        body: kopf.Body,
        namespace: str | None,
        name: str | None,
        **kwargs: Any,
    ) -> None:
        """Wake the daemon of the Reconfiguration's job, or step it here when there is none."""
        ctx.known.attach(kwargs)
        metadata = body.get("metadata") or {}
        if type == "DELETED" or name is None or metadata.get("deletionTimestamp"):
            return
        if (body.get("status") or {}).get("phase") in FINAL_PHASES:
            return
        job = job_of(body)
        wake = ctx.followed_jobs.get((namespace or "", job))
        if wake is not None:
            wake.set()
        else:
            await _step_alone(ctx, namespace or "", name, job)

    @kopf.daemon(
        *streamjobs.RESOURCE,
        cancellation_backoff=CANCELLATION_BACKOFF_S,
        cancellation_timeout=CANCELLATION_TIMEOUT_S,
        registry=registry,
    )
    async def reconfiguration_followers(
        namespace: str | None,
        name: str | None,
        stopped: kopf.DaemonStopped,
        **kwargs: Any,
    ) -> None:
        ctx.known.attach(kwargs)
        if name is not None:
            await follow_job(ctx, namespace or "", name, stopped)


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
                document = await submit(current, spec, job_body, admitted)
            if document is not None:
                await ctx.submissions.settled()  # other objects' submits first
                await record_acceptance(current, spec, document)
        if current.status.phase is Phase.APPLYING:
            await follow_plan(current, job_body)
    if current.status.phase not in FINAL_PHASES:
        return False
    await _wake_next(ctx, namespace, spec.job_ref.name, name)
    return True


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
    or True when this one may go now, not written: `submit` writes Planned or Applying
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


async def _wake_next(ctx: OperatorContext, namespace: str, job: str, finished: str) -> None:
    """Let the next queued reconfiguration of the job go now, not at its next timer run."""
    waiting = [s for s in await _siblings(ctx, namespace, job) if s.phase in WAITING]
    waiting.sort(key=lambda s: (s.created, s.name))
    if waiting and waiting[0].name != finished:
        await step(ctx, namespace, waiting[0].name, job)
