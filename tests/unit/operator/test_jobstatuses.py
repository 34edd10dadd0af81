"""`jobstatuses`: the one writer of a StreamJob's status merges, skips no-ops, and starts
from the operator's own last write (not from the body a handler started with)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import Any

from swivel.operator.clusters import Ref
from swivel.operator.contexts import OperatorContext
from swivel.operator.jobstatuses import current_status, write_job_status
from tests.fakes_agent import TestingAgentLink

JOB: dict[str, Any] = {
    "apiVersion": "swivel.dev/v1alpha1",
    "kind": "StreamJob",
    "metadata": {"name": "j", "namespace": "ns", "uid": "u1", "resourceVersion": "1"},
    "status": {"phase": "Running", "message": "ok"},
}


class RecordingCluster:
    """Stores one job; merge-patches its status and counts the writes."""

    def __init__(self, job: Mapping[str, Any]) -> None:
        self.job = copy.deepcopy(dict(job))
        self.patches: list[tuple[Ref, dict[str, Any], bool]] = []

    async def patch(self, ref: Ref, patch: dict[str, Any], *, status: bool = False) -> Any:
        self.patches.append((ref, patch, status))
        self.job["status"] = {**self.job.get("status", {}), **patch["status"]}
        metadata = self.job["metadata"]
        metadata["resourceVersion"] = str(int(metadata["resourceVersion"]) + 1)
        return copy.deepcopy(self.job)


def _context(cluster: RecordingCluster) -> OperatorContext:
    ctx = OperatorContext(cluster=cluster, agents=TestingAgentLink())  # type: ignore[arg-type]
    jobs = {("ns", "j"): [JOB]}  # what the watch showed: the job before any write
    ctx.known.attach({"streamjobs_by_name": jobs, "unfinished_reconfigurations_by_job": {}})
    return ctx


def test_phase_and_message_land_in_one_status_write() -> None:
    cluster = RecordingCluster(JOB)
    ctx = _context(cluster)
    asyncio.run(write_job_status(ctx, JOB, {"phase": "Failed", "message": "spec.x: bad"}))
    assert len(cluster.patches) == 1
    ref, patch, status = cluster.patches[0]
    assert status and ref.kind == "StreamJob" and ref.name == "j"
    assert patch == {"status": {"phase": "Failed", "message": "spec.x: bad"}}


def test_the_next_writer_starts_from_the_last_write_and_unchanged_fields_are_not_written() -> None:
    cluster = RecordingCluster(JOB)
    ctx = _context(cluster)
    asyncio.run(write_job_status(ctx, JOB, {"phase": "Failed", "message": "spec.x: bad"}))
    # A handler still holding the body from before that write sees the write, not its body.
    assert current_status(ctx, JOB).phase.value == "Failed"
    asyncio.run(write_job_status(ctx, JOB, {"phase": "Failed", "message": "spec.x: bad"}))
    assert len(cluster.patches) == 1  # nothing changed: no write
    asyncio.run(write_job_status(ctx, JOB, {"phase": "Failed", "observedGeneration": 2}))
    assert cluster.patches[-1][1] == {"status": {"observedGeneration": 2}}
