"""Following a Reconfiguration until it settles: a kopf daemon per unfinished object.

kopf starts the daemon for every Reconfiguration the watch shows whose phase is not final
(a new one, or every unfinished one when the operator starts, which is how it resumes),
and the daemon runs `reconfigurations.step` now and then every `intervals.reconfiguration`
seconds until the step says there is nothing left to do. kopf owns its lifetime: it stops
the daemon when the object is deleted, when the operator stops and while peering pauses
the operator (and starts it again on the next watch event after the pause). A finished
Reconfiguration (filtered out by `when=`) starts nothing and carries no finalizer.

What it costs: kopf blocks the deletion of an object with a spawned daemon by its
finalizer, so an unfinished Reconfiguration gets `swivel.dev/finalizer` (one patch when
the daemon starts, one when it has finished: two API writes and two watch events per
Reconfiguration; no progress or last-handled annotations, which only change handlers
write). docs/operator.md has the request counts and why they are worth it.
What one step does is in operator/reconfigurations.py; this module only schedules steps.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf

from swivel.api.phases import FINAL_PHASES
from swivel.operator.contexts import OperatorContext
from swivel.operator.indexes import job_of
from swivel.operator.reconfigurations import RESOURCE, step

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


def unfinished(body: kopf.Body, **_: Any) -> bool:
    """The daemon's filter: only a Reconfiguration that is not Completed or Failed starts
    one (and so gets kopf's finalizer); kopf stops it when the phase becomes final."""
    return (body.get("status") or {}).get("phase") not in FINAL_PHASES


async def follow(
    ctx: OperatorContext, namespace: str, name: str, body: kopf.Body, stopped: kopf.DaemonStopped
) -> None:
    """Step one unfinished Reconfiguration now and then every `intervals.reconfiguration`
    seconds until it settles or kopf stops the daemon (`stopped`)."""
    while not stopped:
        try:
            if await step(ctx, namespace, name, job_of(body)):
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


def register(registry: kopf.OperatorRegistry, ctx: OperatorContext) -> None:
    @kopf.daemon(
        *RESOURCE,
        when=unfinished,
        cancellation_backoff=CANCELLATION_BACKOFF_S,
        cancellation_timeout=CANCELLATION_TIMEOUT_S,
        registry=registry,
    )
    async def reconfiguration_follower(
        body: kopf.Body,
        namespace: str | None,
        name: str | None,
        stopped: kopf.DaemonStopped,
        **kwargs: Any,
    ) -> None:
        ctx.known.attach(kwargs)
        if name is not None:
            await follow(ctx, namespace or "", name, body, stopped)
