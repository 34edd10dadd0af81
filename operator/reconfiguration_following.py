"""Following a Reconfiguration until it settles: one follow-up task per unfinished object.

The kopf `on.event` handler (`register`) starts a task for every unfinished Reconfiguration
the watch shows -- a new one, or every existing one when the operator starts, which is how
it resumes -- and the task runs `reconfigurations.step` now and then every
`intervals.reconfiguration` seconds until the step says there is nothing left to do.
What one step does is in operator/reconfigurations.py; this module only schedules steps,
so that the lifetime of that background work (`ctx.followers`) is in one place.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf

from swivel.api.base import API_GROUP
from swivel.api.phases import FINAL_PHASES
from swivel.operator.clusters import Ref
from swivel.operator.contexts import OperatorContext
from swivel.operator.indexes import job_of
from swivel.operator.reconfigurations import CRD_VERSION, RESOURCE, step

LEGACY_FINALIZER = f"{API_GROUP}/finalizer"  # kopf's, for the timer Reconfigurations once had
FAILED_STEP_DELAY_S = 5.0
logger = logging.getLogger(__name__)


async def _follow_up(ctx: OperatorContext, namespace: str, name: str, job: str) -> None:
    """Step one unfinished Reconfiguration now and then every `intervals.reconfiguration`
    seconds until it settles: what a kopf timer did, without kopf's bookkeeping on the
    object (a timer needs a finalizer: two more patches and watch events per object, and
    the on.create handler's progress and last-handled annotations two or three more)."""
    try:
        while True:
            try:
                if await step(ctx, namespace, name, job):
                    return
                delay = ctx.intervals.reconfiguration
            except kopf.TemporaryError as error:
                delay = error.delay or ctx.intervals.reconfiguration
            except Exception:  # logged; the next run retries, as a timer would
                logger.exception("Reconfiguration %s/%s: step failed", namespace, name)
                delay = FAILED_STEP_DELAY_S
            await asyncio.sleep(delay)
    finally:
        ctx.followers.pop((namespace, name), None)


def follow(ctx: OperatorContext, namespace: str, name: str, job: str = "") -> None:
    """Make sure one follow-up task runs for this Reconfiguration (idempotent)."""
    key = (namespace, name)
    if key not in ctx.followers:
        ctx.followers[key] = asyncio.create_task(
            _follow_up(ctx, namespace, name, job), name=f"reconfiguration/{namespace}/{name}"
        )


def register(registry: kopf.OperatorRegistry, ctx: OperatorContext) -> None:
    """One event handler: every unfinished Reconfiguration the watch shows (a new one, or
    every existing one when the operator starts: resuming) gets a follow-up task. kopf
    keeps no state on the object (no finalizer, no annotations); what the operator knows
    is in its status and the plan-id annotation, as before."""

    @kopf.on.event(*RESOURCE, registry=registry)
    async def reconfiguration_seen(
        type: str | None,  # kopf passes the event type by this name
        body: kopf.Body,
        namespace: str | None,
        name: str | None,
        **kwargs: Any,
    ) -> None:
        ctx.known.attach(kwargs)
        if type == "DELETED" or name is None:
            return
        metadata = body.get("metadata") or {}
        finalizers = list(metadata.get("finalizers") or [])
        if LEGACY_FINALIZER in finalizers:  # left by an operator that still used a timer
            finalizers.remove(LEGACY_FINALIZER)
            ref = Ref(CRD_VERSION, "Reconfiguration", namespace or "", name)
            await ctx.cluster.patch(ref, {"metadata": {"finalizers": finalizers}})
        if metadata.get("deletionTimestamp"):
            return
        if (body.get("status") or {}).get("phase") not in FINAL_PHASES:
            follow(ctx, namespace or "", name, job_of(body))
