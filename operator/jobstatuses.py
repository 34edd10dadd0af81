"""The one writer of a StreamJob's status: every change goes through `write_job_status`.

A job's status is changed by its kopf handlers (create/resume, spec edits, the health
timer) and by the step that completes one of its Reconfigurations
(`reconfiguration_steps.py`). They all write here: under the job's lock, reading the
freshest status the operator knows (its own last write wins over a watch event that has
not arrived yet) and merge-patching the changed fields in one write. So a phase and its
message always land together, and no writer computes its change from a status another
writer has already replaced: kopf's `patch.status` would be applied after the handler
returned, outside the lock, from the body the handler started with.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from swivel.api.streamjob import StreamJobStatus
from swivel.operator.clusters import Ref
from swivel.operator.contexts import OperatorContext


def job_lock(ctx: OperatorContext, body: Mapping[str, Any]) -> asyncio.Lock:
    """The lock of one incarnation of a job (its uid): held by every status writer."""
    return ctx.lock(f"job/{body['metadata']['uid']}")


def freshest(ctx: OperatorContext, body: Mapping[str, Any]) -> Mapping[str, Any]:
    """The job as the operator last wrote or the watch last showed it, else `body`."""
    metadata = body["metadata"]
    known = ctx.known.job(metadata["namespace"], metadata["name"])
    if known is not None and known["metadata"].get("uid") == metadata.get("uid"):
        return known
    return body


def current_status(ctx: OperatorContext, body: Mapping[str, Any]) -> StreamJobStatus:
    """The freshest status (empty if it does not validate), to compute a change from."""
    try:
        return StreamJobStatus.model_validate(dict(freshest(ctx, body).get("status") or {}))
    except ValidationError:
        return StreamJobStatus()


async def write_job_status(
    ctx: OperatorContext, body: Mapping[str, Any], update: Mapping[str, Any]
) -> None:
    """Merge `update` (status fields, wire names) into the job's status: one write, made
    by a caller that holds `job_lock`; remembered, so the next writer starts from it. No
    write when nothing changes."""
    status = freshest(ctx, body).get("status") or {}
    update = {key: value for key, value in update.items() if status.get(key) != value}
    if not update:
        return
    metadata = body["metadata"]
    ref = Ref(str(body["apiVersion"]), "StreamJob", metadata["namespace"], metadata["name"])
    written = await ctx.cluster.patch(ref, {"status": dict(update)}, status=True)
    ctx.known.wrote(written)
