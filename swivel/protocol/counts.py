"""Monitoring through the control plane (Chi §5): what the workers count, and what the
agent serves from it (docs/control-protocol.md, "Worker counts"; docs/migration.md).

Every Python worker's operator wrappers count, per operator and per Spark partition of the
task (a keyed operator's partition is its bin: Spark's state partition), the rows they
processed and the wall time spent inside the user function (`swivel.jobs.control.counting`).
The counts ride on the acks the worker already posts (`POST /v1/control/acks` with an
`AckReport` body): at most one report a second, or with the next ack, never a request of
their own per batch. The agent adds them up per (operator, bin) over a sliding window of
seconds (`swivel.jobs.agent.worker_loads`) and serves the sums inside `GET /v1/loads`
(`ServedLoads.workers`), where the operator's policies read them
(`swivel.controllers.worker_loads`).

Numbers are strict, as in `swivel.protocol.loads`: JSON numbers, finite, non-negative.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from swivel.protocol.documents import Document, Long, Name, WorkerId

Number = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0)]
MAX_COUNTED_PARTITIONS = 2048  # one report: operators x partitions a worker ran since its last
MAX_REPORT_INTERVAL_S = 86_400.0


class PartitionCounts(Document):
    """What one worker process did for `operator` in Spark partition `partition` since
    its previous report."""

    operator: Name
    partition: Long
    """The task's partition (`TaskContext.partitionId()`); for a keyed operator, its bin."""
    rows: Count = 0
    """Input rows handed to the user function."""
    busy_seconds: Number = 0.0
    """Wall time inside the user function (and a keyed operator's state transform)."""


class WorkerCounts(Document):
    """One worker process's counts since its previous report (`seq` - 1)."""

    pid: WorkerId
    """The reporting worker's id (as in its acks; its secret in Swivel-Worker-Secret)."""
    seq: Long
    """Counts up per process from 1: a report sent again after a lost answer is counted once."""
    interval_seconds: Annotated[
        float, Field(ge=0, le=MAX_REPORT_INTERVAL_S, allow_inf_nan=False)
    ] = 0.0
    """Worker clock: how long these counts were gathered for."""
    partitions: Annotated[list[PartitionCounts], Field(max_length=MAX_COUNTED_PARTITIONS)]


class WorkerBinLoad(Document):
    """One bin's load as the workers reported it over the agent's window: the rows and the
    busy time of the keyed operators whose state partition it is."""

    bin: Count
    rows: Count = 0
    busy_seconds: Number = 0.0
    workers: Count = 0
    """Distinct worker processes that reported it within the window."""
    age_seconds: Number = 0.0
    """Since the agent received the newest report for it."""


class WorkerOperatorLoad(Document):
    """One operator's totals over the window, all its partitions."""

    operator: Name
    keyed: bool = False
    """Its partitions are bins (a keyed operator); else they are input partitions."""
    rows: Count = 0
    busy_seconds: Number = 0.0
    workers: Count = 0


class WorkerLoads(Document):
    """The worker-reported load over the agent's sliding window (`GET /v1/loads`,
    `workers`); None there until a worker reported counts within the window."""

    window_seconds: Number = 0.0
    """What the sums cover: the window, or less since the first report."""
    age_seconds: Number = 0.0
    """Since the agent received the newest report (any worker)."""
    reports: Count = 0
    """Reports within the window."""
    bins: list[WorkerBinLoad] = Field(default_factory=list)
    """Bins of the keyed operators that ran rows within the window (a bin absent: none)."""
    operators: list[WorkerOperatorLoad] = Field(default_factory=list)
