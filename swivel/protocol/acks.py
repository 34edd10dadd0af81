"""A worker's acknowledgement (`POST /v1/control/acks`, docs/control-protocol.md).

The control client in every Python worker posts a JSON array of these; the agent reads the
whole array against `Ack` before applying any (`swivel.jobs.agent.acks.parse_acks`). How a
worker counts as switched, and when it may say "armed", is `swivel.jobs.control.arming`.

A worker with counts to report (`swivel.protocol.counts`: rows and busy time per operator
and bin) posts an `AckReport` object instead of the bare array: its acks (maybe none) and
the counts, piggybacked on the same request (Chi §5: monitoring through the control plane).
"""

from __future__ import annotations

import enum
from typing import Annotated

from pydantic import Field

from swivel.protocol.counts import WorkerCounts
from swivel.protocol.documents import Document, Long, WorkerId

MAX_ACKS = 10_000  # a worker's whole queue (`swivel.jobs.control.ack_sender.MAX_QUEUED_ACKS`)
MAX_PENDING_REPORTS = 8  # counts reports one body may carry (unsent ones, oldest first)


class AckKind(enum.StrEnum):
    """How a worker switched (`swivel.jobs.control.arming`)."""

    PROCESSED = "processed"  # records ran under the version
    ARMED = "armed"  # switched on receipt of the snapshot


class Ack(Document):
    """'Worker `pid` switched `operator` to function `version` under `configVersion`.'"""

    pid: WorkerId
    """The acking worker's own id (POST /v1/control/workers); its secret in
    Swivel-Worker-Secret."""
    operator: Annotated[str, Field(min_length=1, max_length=253)]
    version: Long
    """The operator's function version."""
    config_version: Long | None = None
    """The configuration version it ran under (how a Fries head that is no target
    switches)."""
    partition: Long | None = None
    batch_id: Long | None = None
    """The micro-batch that ran it (processed); at most 8 beyond the driver's last report."""
    at: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    """When it switched, worker clock: the check that chose the version, or the receipt;
    the agent's arrival time when left out."""
    kind: Annotated[AckKind, Field(strict=False)] = AckKind.PROCESSED  # from its value
    """processed: records ran under the version; armed: switched on receipt."""


class AckReport(Document):
    """The object form of `POST /v1/control/acks`: acks and the worker's counts."""

    acks: Annotated[list[Ack], Field(max_length=MAX_ACKS)] = Field(default_factory=list)
    counts: Annotated[list[WorkerCounts], Field(max_length=MAX_PENDING_REPORTS)] = Field(
        default_factory=list
    )
    """Reports not yet acknowledged by the agent, oldest first (`WorkerCounts.seq`)."""
