"""Finding one job's Reconfigurations without listing every Reconfiguration.

Queueing asks "which Reconfigurations of this job are waiting or running?" at every step
and every health tick. Listing the whole namespace made that grow with the square of the
objects kept (100 jobs x 9 rounds: a 1.8 MB list per call). Each Reconfiguration carries
its job as a label, set by the operator on the first step, so the API server filters.
A job name longer than a label value may be (63) falls back to listing and filtering.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from swivel.api.base import API_GROUP, API_VERSION
from swivel.operator.clusters import Ref
from swivel.operator.contexts import OperatorContext

JOB_LABEL = f"{API_GROUP}/job"
MAX_LABEL_VALUE = 63


def _selector(job: str) -> dict[str, str] | None:
    return {JOB_LABEL: job} if len(job) <= MAX_LABEL_VALUE else None


def missing_job_label(obj: Mapping[str, Any], job: str) -> dict[str, Any] | None:
    """The metadata patch that labels `obj` with its job, or None when nothing is needed."""
    if _selector(job) is None or (obj["metadata"].get("labels") or {}).get(JOB_LABEL) == job:
        return None
    return {"metadata": {"labels": {JOB_LABEL: job}}}


async def reconfigurations_of(ctx: OperatorContext, namespace: str, job: str) -> list[Any]:
    ref = Ref(f"{API_GROUP}/{API_VERSION}", "Reconfiguration", namespace)
    items = await ctx.cluster.list(ref, _selector(job))
    return [i for i in items if (i.get("spec") or {}).get("jobRef", {}).get("name") == job]
