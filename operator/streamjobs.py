"""kopf handlers for StreamJob: own the children, classify edits, watch health, clean up.

- create / resume: render the children and create-or-patch them (idempotent; the agent
  token is generated once and kept; the checkpoint claim is created once, never patched).
- update of `spec`: classify the edit (`classifying`): live edits become a Reconfiguration
  object; restart-class edits replace the driver pod gracefully (the pod carries a hash of
  the restart-relevant spec, so a replaced pod is never replaced twice): the old pod is
  deleted with its grace period (SIGTERM: the driver stops at a batch boundary) and the new
  one is created only once the old one is gone, as the checkpoint claim is ReadWriteOnce.
  Shown in `status.message` and an Event.
- timer: observe the driver pod and the agent, write conditions (`healthchecks`); a driver
  pod that is missing (deleted by hand, or a predecessor's pod was still terminating when
  the job was created) is created again.
- delete: the finalizer deletes the children (owner references would too, but an explicit
  cleanup also works where garbage collection is slow or off), except the credentials
  Secret: garbage collection removes it, so the operator needs no right to delete Secrets.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import Any

import kopf
from pydantic import ValidationError

from swivel.api.base import API_GROUP, API_VERSION
from swivel.api.errors import SpecError, problems_from
from swivel.api.functions import spec_problems
from swivel.api.streamjob import StreamJob, StreamJobSpec
from swivel.controllers.shapes import CompileError, plan_shape
from swivel.operator import events, metrics
from swivel.operator.admission import (
    STREAMJOB_SPEC_DEPTH,
    service_name_problem,
    spec_bound_problem,
)
from swivel.operator.agents import AgentRejected, AgentUnreachable
from swivel.operator.children import render_children
from swivel.operator.classifying import classify, edit_reconfiguration
from swivel.operator.clusters import ApiFailure, Ref
from swivel.operator.contexts import OperatorContext
from swivel.operator.credentials import job_credentials
from swivel.operator.healthchecks import JobObservation, next_status
from swivel.operator.images import installed_policy
from swivel.operator.joblabels import reconfigurations_of
from swivel.operator.jobstatuses import current_status, job_lock, write_job_status
from swivel.operator.naming import Names, Owner, name_problems
from swivel.operator.phases import ACTIVE
from swivel.operator.restarts import RESTART_HASH_ANNOTATION, SINK_ANNOTATION, restart_refusal

PLURAL = "streamjobs"
CREATED_ONCE = frozenset({"Secret", "PersistentVolumeClaim"})  # never patched by a reconcile
RESOURCE = (API_GROUP, API_VERSION, PLURAL)
POD_GONE_WAIT_S = 3.0


def owner_of(body: Mapping[str, Any]) -> Owner:
    metadata = body["metadata"]
    return Owner(name=metadata["name"], namespace=metadata["namespace"], uid=metadata["uid"])


def parse_job(body: Mapping[str, Any]) -> StreamJob:
    """The StreamJob model, or SpecError naming every bad field."""
    problems = [f"metadata.name: {p}" for p in name_problems(body["metadata"]["name"])]
    if problems:
        raise SpecError.single("metadata.name", problems[0].split(": ", 1)[1])
    unfit = service_name_problem(body["metadata"]["name"])
    if unfit is not None:
        raise SpecError([unfit])
    too_deep = spec_bound_problem(body.get("spec"), STREAMJOB_SPEC_DEPTH)
    if too_deep is not None:  # the driver's manifest loader would refuse the rendered job
        raise SpecError([too_deep])
    try:
        job = StreamJob.model_validate(
            {"metadata": dict(body["metadata"]), "spec": dict(body.get("spec") or {})}
        )
    except ValidationError as error:
        raise SpecError(problems_from(error)) from None
    refusal = installed_policy().refusal(job.spec.image)  # the installation's (images.py)
    if refusal is not None:
        raise SpecError.single("spec.image", refusal)
    refused = spec_problems(job.spec)  # functions outside the installation's allow-list
    if refused:
        raise SpecError(refused)
    try:  # what `swivel run` refuses before Spark starts: the driver could never compile it
        plan_shape(job.spec)
    except CompileError as error:
        raise SpecError.single(error.field, error.reason) from None
    return job


async def apply_children(ctx: OperatorContext, job: StreamJob, owner: Owner) -> str:
    """Create or patch every child; returns what happened to the driver pod: kept, created,
    replaced, or `refused: <why>` (a restart that could not resume, `restart_refusal`)."""
    cluster, names = ctx.cluster, Names(owner.name)
    secret = await cluster.get(Ref("v1", "Secret", owner.namespace, names.token_secret))
    credentials = job_credentials(secret, owner)  # kept once issued, never rotated
    outcome = "kept"
    peer = os.environ.get("POD_NAMESPACE")  # the operator's: let into the agent port
    for child in render_children(job, owner, credentials, operator_namespace=peer):
        if child["kind"] == "Pod":
            outcome = await _ensure_pod(ctx, child, job)
            continue
        try:
            await cluster.create(child)
        except ApiFailure as failure:
            if failure.status != 409:
                raise
            # The token is never rotated; a claim's spec is immutable once bound.
            if child["kind"] not in CREATED_ONCE:
                body = {k: v for k, v in child.items() if k not in ("apiVersion", "kind")}
                await cluster.patch(Ref.of(child), body)
    return outcome


async def _ensure_pod(ctx: OperatorContext, pod: dict[str, Any], job: StreamJob) -> str:
    ref = Ref.of(pod)
    wanted = pod["metadata"]["annotations"][RESTART_HASH_ANNOTATION]
    existing = await ctx.cluster.get(ref)
    if existing is not None:
        metadata = existing["metadata"]
        annotations = metadata.get("annotations") or {}
        running = annotations.get(RESTART_HASH_ANNOTATION)
        ours = _owner_uid(existing) == _owner_uid(pod)
        if ours and running == wanted and not metadata.get("deletionTimestamp"):
            return "kept"
        refusal = restart_refusal(annotations.get(SINK_ANNOTATION), job)
        if ours and refusal is not None and not metadata.get("deletionTimestamp"):
            return f"refused: {refusal}"
        # A different spec, a pod stopping, or a predecessor job's pod by the same name:
        # stop it gracefully (its grace period: the driver stops at a batch boundary) and
        # start the new one only when it is gone (the checkpoint claim is ReadWriteOnce).
        if not metadata.get("deletionTimestamp"):
            await ctx.cluster.delete(ref)
        if not await _gone(ctx, ref):
            raise kopf.TemporaryError("waiting for the old driver pod to stop", delay=2)
        await ctx.cluster.create(pod)
        return "replaced" if ours else "created"
    try:
        await ctx.cluster.create(pod)
    except ApiFailure as failure:
        if failure.status != 409:
            raise
        raise kopf.TemporaryError(
            "a driver pod appeared meanwhile; looking again", delay=1
        ) from None
    return "created"


def _owner_uid(obj: Mapping[str, Any]) -> str | None:
    for reference in obj["metadata"].get("ownerReferences") or []:
        if reference.get("controller"):
            return str(reference.get("uid"))
    return None


async def _gone(ctx: OperatorContext, ref: Ref) -> bool:
    deadline = asyncio.get_running_loop().time() + POD_GONE_WAIT_S
    while await ctx.cluster.get(ref) is not None:
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.1)
    return True


async def _invalid(ctx: OperatorContext, body: Mapping[str, Any], error: SpecError) -> None:
    """Failed, with the fields in the message (one write), an Event and the metric."""
    message = str(error)
    reason = "ImageRefused" if error.problems[0].field == "spec.image" else "InvalidSpec"
    await write_job_status(ctx, body, {"phase": "Failed", "message": message})
    events.emit(body, reason, message, warning=True)
    metrics.FAILURES.labels("streamjob", reason).inc()


async def ensure(ctx: OperatorContext, body: Mapping[str, Any]) -> None:
    """Create or resume: the children, then one status write (called under `job_lock`)."""
    metrics.RECONCILES.labels("streamjob", "ensure").inc()
    try:
        job = parse_job(body)
    except SpecError as error:
        await _invalid(ctx, body, error)
        raise kopf.PermanentError(str(error)) from None
    outcome = await apply_children(ctx, job, owner_of(body))
    update: dict[str, Any] = {"observedGeneration": body["metadata"].get("generation")}
    if current_status(ctx, body).executors is None:
        update["executors"] = job.spec.executor.instances
    if outcome.startswith("refused: "):
        update["message"] = _refused(body, outcome)
    elif outcome != "kept":
        events.emit(body, "DriverCreated", f"driver pod {outcome}")
    await write_job_status(ctx, body, update)


async def edited(
    ctx: OperatorContext,
    body: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any] | None,
) -> None:
    """A spec edit: classified, acted on, said in status (one write, under `job_lock`)."""
    metrics.RECONCILES.labels("streamjob", "update").inc()
    try:
        job = parse_job(body)
        old_spec = StreamJobSpec.model_validate(dict(old or {}))
    except SpecError as error:
        await _invalid(ctx, body, error)
        raise kopf.PermanentError(str(error)) from None
    except ValidationError:  # the previous spec was invalid: nothing live to compare with
        old_spec = None
    owner = owner_of(body)
    generation = int(body["metadata"].get("generation") or 0)
    if old_spec is None:
        plan = None
        message = f"generation {generation}: previous spec was invalid -> restart"
    else:
        plan = classify(old_spec, job.spec, owner.name)
        message = plan.describe(generation)
    if plan is not None and plan.reconfiguration is not None:
        recon = edit_reconfiguration(plan.reconfiguration, owner, generation)
        try:
            await ctx.cluster.create(recon)
        except ApiFailure as failure:
            if failure.status != 409:
                raise
        message += f": Reconfiguration {recon['metadata']['name']}"
    outcome = await apply_children(ctx, job, owner)
    update: dict[str, Any] = {"message": message, "observedGeneration": generation}
    if outcome == "replaced":
        update["phase"] = "Restarting"
    events.emit(body, "SpecChangeClassified", message)
    if outcome.startswith("refused: "):
        update["message"] = _refused(body, outcome, f"{message}: ")
    await write_job_status(ctx, body, update)


def _refused(body: Mapping[str, Any], outcome: str, prefix: str = "") -> str:
    """A restart the driver could not resume from: kept running, said in an Event; returns
    the status message."""
    why = outcome.removeprefix("refused: ")
    events.emit(body, "RestartRefused", why, warning=True)
    metrics.FAILURES.labels("streamjob", "RestartRefused").inc()
    return prefix + why


async def deleted(ctx: OperatorContext, body: Mapping[str, Any]) -> None:
    metrics.RECONCILES.labels("streamjob", "delete").inc()
    owner = owner_of(body)
    names = Names(owner.name)
    for api_version, kind, name in (
        ("v1", "Pod", names.driver_pod),
        ("v1", "Service", names.service),
        ("v1", "ConfigMap", names.executor_template),
        ("v1", "ConfigMap", names.job_config),
        ("rbac.authorization.k8s.io/v1", "RoleBinding", names.service_account),
        ("rbac.authorization.k8s.io/v1", "Role", names.service_account),
        ("v1", "ServiceAccount", names.service_account),
        ("v1", "PersistentVolumeClaim", names.checkpoints),
    ):
        await ctx.cluster.delete(Ref(api_version, kind, owner.namespace, name))


async def active_reconfiguration(ctx: OperatorContext, namespace: str, job: str) -> str | None:
    for item in await reconfigurations_of(ctx, namespace, job):
        phase = (item.get("status") or {}).get("phase")
        if phase in ACTIVE:
            return f"{item['metadata']['name']} ({phase})"
    return None


async def observe(ctx: OperatorContext, body: Mapping[str, Any]) -> JobObservation:
    owner = owner_of(body)
    generation = int(body["metadata"].get("generation") or 0)
    try:
        job = parse_job(body)
    except SpecError as error:
        return JobObservation(generation, 1, 1, None, None, None, invalid=str(error))
    pod = await ctx.cluster.get(Ref("v1", "Pod", owner.namespace, Names(owner.name).driver_pod))
    health, agent_error = None, None
    address = await ctx.job_address(owner.namespace, owner.name, owner.uid)
    if address is None:
        agent_error = "no agent token yet"
    else:
        try:
            health = await ctx.agents.health(address)
        except AgentRejected as error:  # 401 with a remembered token: read it next time
            if error.status != 401:
                raise
            await ctx.job_address(owner.namespace, owner.name, owner.uid, fresh=True)
            agent_error = str(error)
        except AgentUnreachable as error:
            agent_error = str(error)
    return JobObservation(
        generation=generation,
        bins=job.spec.dataflow.bins,
        desired_executors=job.spec.executor.instances,
        pod=pod,
        health=health,
        agent_error=agent_error,
        reconfiguring=await active_reconfiguration(ctx, owner.namespace, owner.name),
    )


async def check_health(ctx: OperatorContext, body: Mapping[str, Any]) -> None:
    """Observe the pod and the agent; write what changed (one write, under `job_lock`)."""
    metrics.RECONCILES.labels("streamjob", "health").inc()
    observation = await observe(ctx, body)
    if (
        observation.pod is None
        and observation.invalid is None
        and not body["metadata"].get("deletionTimestamp")
    ):
        outcome = await apply_children(ctx, parse_job(body), owner_of(body))
        events.emit(body, "DriverCreated", f"driver pod {outcome} (it was missing)")
    current = current_status(ctx, body)  # after the observation: the latest write counts
    updated = next_status(current, observation, ctx.clock())
    before = current.to_manifest()
    after = updated.to_manifest()
    if after == before:
        return
    await write_job_status(
        ctx, body, {key: value for key, value in after.items() if before.get(key) != value}
    )
    old_ready = _condition_reason(before)
    new_ready = _condition_reason(after)
    if old_ready != new_ready:
        warning = new_ready[0] != "True" and new_ready[1] not in ("DriverPending", "DriverStarting")
        events.emit(
            body, new_ready[1], f"Ready={new_ready[0]}: {after.get('phase')}", warning=warning
        )


def _condition_reason(status: Mapping[str, Any]) -> tuple[str, str]:
    for condition in status.get("conditions") or []:
        if condition["type"] == "Ready":
            return condition["status"], condition["reason"]
    return "Unknown", ""


def register(registry: kopf.OperatorRegistry, ctx: OperatorContext) -> None:
    @kopf.on.resume(*RESOURCE, registry=registry)
    @kopf.on.create(*RESOURCE, registry=registry)
    async def streamjob_ensure(body: kopf.Body, **_: Any) -> None:
        async with job_lock(ctx, body):
            await ensure(ctx, body)

    @kopf.on.update(*RESOURCE, field="spec", registry=registry)
    async def streamjob_edited(body: kopf.Body, old: Any, new: Any, **_: Any) -> None:
        async with job_lock(ctx, body):
            await edited(ctx, body, old, new)

    @kopf.on.delete(*RESOURCE, registry=registry)
    async def streamjob_deleted(body: kopf.Body, **_: Any) -> None:
        await deleted(ctx, body)

    @kopf.timer(*RESOURCE, interval=ctx.intervals.health, registry=registry)
    async def streamjob_health(body: kopf.Body, **kwargs: Any) -> None:
        ctx.known.attach(kwargs)
        async with job_lock(ctx, body):
            await check_health(ctx, body)
