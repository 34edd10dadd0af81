"""The bodies the agent reads: what the operator submits and what the driver and the workers
report (docs/control-protocol.md). Each is parsed strictly before the hub changes anything
(`Document.parse`: a 400 naming each bad field); the acks are `swivel.protocol.acks`, the
load measurement `swivel.protocol.loads`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from swivel.protocol.documents import (
    INT_LIMIT,
    MAX_NAME,
    Document,
    Long,
    Name,
    Seconds,
    Text,
    WorkerId,
)

MAX_EXECUTORS = 4096  # executors one prewarm check may name
ExecutorId = Annotated[str, Field(min_length=1, max_length=MAX_NAME)]
ANSWERED = "answered"  # a prewarm check's state of an executor whose helper answered


class SubmissionBody(Document):
    """`POST /v1/plans` (the spec itself is `ReconfigurationSpec`, validated after this)."""

    name: Name
    spec: Any = None
    """The Reconfiguration spec (wire form, camelCase)."""
    scheduler_override: Literal["naive"] | None = None
    """Benchmarks only: the naive baseline."""
    requested_at: Seconds | None = None
    """Epoch seconds when the user asked (the submitter's clock): delays count from it."""
    idempotency_key: Annotated[str, Field(min_length=1, max_length=512)] | None = None
    """The submitter's key for this reconfiguration (the operator sends the
    Reconfiguration's namespace/name/uid): a submission with the key of an earlier one gets
    that plan back (200) instead of a new plan or a 409, across agent restarts."""


class ProgressReport(Document):
    """`POST /v1/driver/progress`: a micro-batch started or completed."""

    batch_id: Long
    """At most 1 000 000 beyond the last one reported (422)."""
    event: Literal["started", "completed"]
    at: Seconds | None = None
    """Epoch seconds, the driver's clock."""
    duration_ms: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    num_input_rows: Long | None = None
    query_id: Text | None = None
    run_id: Text | None = None


class HandOverReport(Document):
    """One hand-over the migration executor carried out: in plan step `step`, `from` handed
    `bins` to `to`, re-pointed at the boundary before batch `batch` (None: by an earlier
    driver); which of them ran on `to` (`landed`) and which were served elsewhere."""

    step: Annotated[int, Field(ge=1, lt=INT_LIMIT)]
    from_: Annotated[Text, Field(alias="from")]
    to: Text
    bins: Annotated[list[Long], Field(max_length=65536)]
    batch: Long | None = None
    landed: Annotated[list[Long], Field(max_length=65536)] = []
    elsewhere: Annotated[list[Long], Field(max_length=65536)] = []


class MigrationReport(Document):
    """`POST /v1/driver/migration`: a bin migration's progress (`Migration.to_dict`)."""

    plan_id: Name
    phase: Literal["Pending", "Running", "Completed", "Failed"]
    message: Text = ""
    id: Text | None = None
    kind: Text | None = None
    step: Long | None = None
    steps: Long | None = None
    bins_moved: Long | None = None
    bins_total: Long | None = None
    first_batch: Long | None = None
    last_batch: Long | None = None
    duration_s: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    retries: Long | None = None
    strategy: Text | None = None
    landed_elsewhere: Annotated[list[dict[str, Any]], Field(max_length=65536)] | None = None
    meta_topology: dict[str, Any] | None = None  # shown as reported (depth: `read_json`)
    # The hand-overs carried out so far, in order (`Migration.hand_over`); the status keeps
    # the latest few (`plans.progress`)
    hand_over: Annotated[list[HandOverReport], Field(max_length=65536)] | None = None
    bins_prewarmed: Long | None = None  # switched onto a copy loaded ahead
    prewarm_fallback: Text | None = None  # why the rest moved the plain way


class CoordinationReport(Document):
    """`POST /v1/driver/coordination`: the driver applied a coordination interval."""

    interval_seconds: Annotated[float, Field(gt=0, le=86400.0, allow_inf_nan=False)]
    plan_id: Name | None = None
    applied_at: Seconds | None = None  # the driver's clock


class PrewarmCheck(Document):
    """`POST /v1/driver/prewarm-check`: the prewarm helper's round trip once the query has
    committed a batch with state (`StatePrewarm.check`; docs/migration.md, "Answers over
    RPC"): per live executor, `answered`, or why not. A prewarmed migration's steps whose
    targets did not answer move the plain way (`prewarmFallback`): the check says so at
    start, before any Reconfiguration asks for it."""

    executors: Annotated[dict[ExecutorId, Text], Field(max_length=MAX_EXECUTORS)]
    """Spark's executor id -> `answered`, or the reason the helper did not answer there."""
    checked_at: Seconds | None = None
    """Epoch seconds, the driver's clock."""

    @property
    def unanswered(self) -> dict[str, str]:
        """The executors whose helper did not answer, with why."""
        return {e: state for e, state in sorted(self.executors.items()) if state != ANSWERED}


class ActionDone(Document):
    """`POST /v1/driver/actions/done`: the driver carried out action `seq`."""

    seq: Annotated[int, Field(ge=1, lt=INT_LIMIT)]


class WorkerEnrolment(Document):
    """`POST /v1/control/workers`: a worker process asks for an identity of its own. `pid` is
    the id it would like (its process id); the agent answers with the id it got (that one
    unless taken) and the secret every later call for that id must present."""

    pid: WorkerId
