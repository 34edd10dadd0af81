"""One job's unfinished Reconfigurations, and the job label they carry.

Queueing asks "which Reconfigurations of this job are waiting or running?" at every step,
every health tick and every policy tick. The answer comes from kopf's index of unfinished
Reconfigurations (`indexes`), not from the API server. Until the indexes are attached (a
context no kopf handler has run in yet), the namespace is listed and filtered by `jobRef`.

The label `swivel.dev/job` names the job for `kubectl get reconfigurations -l ...`: the
operator writes it with the plan-id annotation when the agent accepts the plan (one
metadata patch); automatic Reconfigurations are created with it. A job name longer than a
label value may be (63) gets no label.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from swivel.api.base import API_GROUP, API_VERSION
from swivel.operator.clusters import Ref
from swivel.operator.contexts import OperatorContext
from swivel.operator.indexes import finished, job_of
from swivel.operator.naming import JOB_LABEL

MAX_LABEL_VALUE = 63


def missing_job_label(obj: Mapping[str, Any], job: str) -> dict[str, str]:
    """The labels to merge into `obj`'s metadata to label it with its job ({} if none)."""
    if len(job) > MAX_LABEL_VALUE or (obj["metadata"].get("labels") or {}).get(JOB_LABEL) == job:
        return {}
    return {JOB_LABEL: job}


async def reconfigurations_of(ctx: OperatorContext, namespace: str, job: str) -> list[Any]:
    """The job's unfinished Reconfigurations (Pending, Queued, Planned, Applying)."""
    known = ctx.known.reconfigurations_of(namespace, job)
    if known is not None:
        return known
    ref = Ref(f"{API_GROUP}/{API_VERSION}", "Reconfiguration", namespace)
    return [i for i in await ctx.cluster.list(ref) if job_of(i) == job and not finished(i)]
