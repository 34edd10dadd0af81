"""The plan document: what the agent answers for a plan (`POST /v1/plans`,
`GET /v1/plans/{id}`), and what the operator shows in a Reconfiguration's status and the
CLI prints. The agent renders it from its plan record (`swivel.jobs.agent.plans`).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from swivel.api.phases import PlanPhase
from swivel.api.reconfiguration import HandOverStatus
from swivel.protocol.documents import Document

Instant = str | None  # RFC 3339, UTC (what a Reconfiguration's status holds)


class PlanTimings(Document):
    requested_at: Instant = None
    accepted_at: Instant = None
    first_switch_at: Instant = None
    last_switch_at: Instant = None
    propagated_at: Instant = None
    in_effect_at: Instant = None
    completed_at: Instant = None


class OperatorProgress(Document):
    """A target operator: the function version it switches to, its workers switched/total."""

    version: int
    switched: int
    total: int


class HeadProgress(Document):
    """A Fries head that is no target: its workers switched/total."""

    switched: int
    total: int


class PlanProgress(Document):
    workers_switched: int
    workers_total: int
    operators: dict[str, OperatorProgress]
    heads: dict[str, HeadProgress]
    bins_moved: int = 0  # from the driver's migration report, 0 until it counts them
    bins_total: int = 0
    step: int = 0
    steps: int = 0
    # The latest hand-overs the driver carried out, in order (its report's `handOver`, bounded)
    hand_over: list[HandOverStatus] = []
    hand_overs: int = 0  # how many it carried out so far
    bins_prewarmed: int = 0  # switched onto a copy loaded ahead (spec.migration.prewarm)
    prewarm_fallback: str | None = None  # why bins moved the plain way instead


class PlanDocument(Document):
    """A plan's phase, progress and timings. `revision` differs whenever the document does
    (opaque, not a count): a follower long-polls with the one it holds."""

    openapi_name: ClassVar[str] = "Plan"  # its component in the agent's OpenAPI document

    id: str
    name: str
    phase: PlanPhase
    scheduler: str
    config_version: int
    plan: dict[str, Any] = Field(description="What `swivel plan --output json` prints.")
    timings: PlanTimings
    delay_ms: float | None = None
    """The request to the new version in effect (swivel.jobs.agent.timings); null until
    Completed."""
    armed_ms: float | None = None
    """The request to the last worker hosting a target or head holding the new version."""
    propagation_ms: float | None = None
    """The request to every target having run records under its new version."""
    progress: PlanProgress
    message: str = ""
    migration: dict[str, Any] | None = None  # the driver's last bin-migration report
    coordination: dict[str, Any] | None = None  # the driver's confirmation of the interval
    revision: int = 0
    """Differs whenever the document does (opaque, not a count)."""
