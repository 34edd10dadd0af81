"""What the agent answers, besides the snapshot and the plan document: its errors, its
receipts, a worker's identity, the driver's boundary actions, the live configuration and
the job's topology (docs/control-protocol.md). Every answer is rendered from one of these
models (`to_wire`), and the agent's OpenAPI document is generated from them
(`swivel openapi`), so what is documented is what is sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import Field

from swivel.api.errors import FieldProblem
from swivel.protocol.bodies import PrewarmCheck
from swivel.protocol.documents import Document, WorkerId
from swivel.protocol.snapshots import Snapshot


class Problem(Document):
    """One bad input: the field (a dotted wire path, `` for the request as a whole) and why."""

    field: str
    reason: str


class Errors(Document):
    """Every refusal (4xx) and the last-resort 500: one problem per bad field."""

    errors: list[Problem]
    running_plan: str | None = None  # a 409 busy: the plan in flight

    @classmethod
    def of(cls, problems: Iterable[FieldProblem], running_plan: str | None = None) -> Errors:
        listed = [Problem(field=p.field, reason=p.reason) for p in problems]
        return cls(errors=listed, running_plan=running_plan)

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class Health(Document):
    """`/healthz`, `/readyz`: in words."""

    status: str


class Received(Document):
    """A report taken (202): how many documents it held."""

    received: int


class WorkerIdentity(Document):
    """A worker's enrolment answer: the id it got (the one it proposed unless taken) and the
    secret every later call naming that id presents (Swivel-Worker-Secret)."""

    pid: WorkerId
    """The worker id it got: the one it proposed unless that was taken."""
    secret: str
    """Known only to this worker and the agent; sent as Swivel-Worker-Secret."""


class ActionMarked(Document):
    """`POST /v1/driver/actions/done`: `known` is false when the agent keeps no action `seq`."""

    seq: int
    known: bool


class BinMove(Document):
    bins: list[int]
    to: str


DriverActionKind = Literal[
    "restart", "move-bins", "request-executors", "kill-executors", "set-coordination"
]


class DriverAction(Document):
    """A boundary action the driver carries out (`GET /v1/driver/actions`), numbered by `seq`.
    Which fields an action has depends on its kind; absent ones are not sent."""

    seq: Annotated[int, Field(ge=1)]
    action: DriverActionKind
    config_version: int | None = None  # restart: the configuration it restarts into
    plan_id: str | None = None
    executors: int | list[str] | None = None  # request-executors: the total; kill: the ids
    moves: list[BinMove] | None = None
    migration: dict[str, Any] | None = None  # the spec's migration settings
    # move-bins, request-executors: the migration plan the agent made (`MigrationPlan.to_dict`:
    # the placement it assumes and the steps in hand-over order); carried out as given
    plan: dict[str, Any] | None = None
    interval_seconds: float | None = None  # set-coordination

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class LiveConfig(Snapshot):
    """`GET /v1/config`: the current snapshot, the plan in flight, the coordination interval
    the driver last confirmed (a restarted driver takes it up), where a corrupt state
    file was moved at start (docs/agent.md) and the driver's last prewarm check, each null
    when there is none."""

    active_plan: str | None = None
    coordination_interval_seconds: float | None = None
    state_recovered_from: str | None = None
    prewarm_check: PrewarmCheck | None = None


class TopologyOperator(Document):
    name: str
    kind: str
    inputs: list[str]
    parallelism: int
    key: str | None = None


class TopologyWorker(Document):
    pid: int
    operators: list[str]
    last_seen: float  # epoch seconds, the agent's clock


class Topology(Document):
    """`GET /v1/topology`: the job's operators and the live worker processes hosting them."""

    job: str
    bins: int
    operators: list[TopologyOperator]
    workers: list[TopologyWorker]
