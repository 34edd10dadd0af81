"""What each of the agent's routes means, for its OpenAPI document (`swivel openapi`).

The route table (method, path, handler, roles) is `app.ROUTES`; the bodies and answers are
the protocol models. This table adds what neither can say: the words, the query
parameters and which statuses a route answers. `openapi.py` puts the three together and
fails when a route has no entry here or an entry names no route.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, TypeAdapter

from swivel.protocol.acks import Ack
from swivel.protocol.answers import (
    ActionMarked,
    DriverAction,
    Errors,
    Health,
    LiveConfig,
    Received,
    Topology,
    WorkerIdentity,
)
from swivel.protocol.bodies import (
    ActionDone,
    CoordinationReport,
    MigrationReport,
    PrewarmCheck,
    ProgressReport,
    SubmissionBody,
    WorkerEnrolment,
)
from swivel.protocol.documents import MAX_PLAN_WAIT_S
from swivel.protocol.loads import LoadMeasurement, ServedLoads
from swivel.protocol.plans import PlanDocument
from swivel.protocol.snapshots import Snapshot

Model = type[BaseModel] | TypeAdapter[Any]
ACKS = TypeAdapter(list[Ack])
# Shared refusals (components/responses), each answered with `Errors`.
BAD_REQUEST, UNAUTHORIZED, FORBIDDEN = "BadRequest", "Unauthorized", "Forbidden"
TOO_LARGE, IMPLAUSIBLE = "TooLarge", "Implausible"
SHARED_RESPONSES = {
    UNAUTHORIZED: "Missing or wrong bearer token (WWW-Authenticate is set).",
    FORBIDDEN: (
        "A valid token of a role that may not call this route (field: Authorization); or, "
        "on the workers' routes, a call naming a registered worker without that worker's "
        "Swivel-Worker-Secret (field: pid, or [i].pid)."
    ),
    TOO_LARGE: "The body is larger than 4 MiB (field: body).",
    IMPLAUSIBLE: (
        "Well formed, but not true of this job as the agent knows it (an unknown operator, "
        "plan or unregistered worker pid, a version not published, a batch id beyond the "
        "driver's); nothing is applied."
    ),
    BAD_REQUEST: "Malformed input; each error names its field.",
}
REFUSED = {"401": UNAUTHORIZED, "403": FORBIDDEN}
BODY_REFUSED = {"400": BAD_REQUEST, **REFUSED, "413": TOO_LARGE}
FULL = "As many workers as the registry holds are alive (4096)."


@dataclass(frozen=True)
class Answer:
    description: str
    model: type[BaseModel] | None = None  # None: no JSON body (304, text, YAML)


@dataclass(frozen=True)
class Operation:
    summary: str
    answers: dict[str, Answer | str]  # status -> an answer, or a shared response's name
    body: Model | None = None
    parameters: tuple[dict[str, Any], ...] = ()
    description: str | None = None
    open: bool = False  # no token needed (kubelet probes)


def query(name: str, schema: dict[str, Any], description: str | None = None) -> dict[str, Any]:
    parameter = {"name": name, "in": "query", "schema": schema}
    return parameter if description is None else {**parameter, "description": description}


def errors(description: str) -> Answer:
    return Answer(description, Errors)


SINCE = query("since", {"type": "integer", "default": 0})
WAIT = query("timeout", {"type": "number", "default": 20, "maximum": 60})
SECRET = {
    "name": "Swivel-Worker-Secret",
    "in": "header",
    "schema": {"type": "string"},
    "description": "The secret of the worker the call names (POST /v1/control/workers).",
}

OPERATIONS: dict[tuple[str, str], Operation] = {
    ("GET", "/healthz"): Operation(
        "Liveness (no token).",
        {"200": Answer("The agent process serves requests.", Health)},
        open=True,
    ),
    ("GET", "/readyz"): Operation(
        "Readiness (no token); ready once the driver runtime has reported progress.",
        {"200": Answer("Ready.", Health), "503": Answer("No driver progress yet.", Health)},
        open=True,
    ),
    ("GET", "/metrics"): Operation(
        "Prometheus exposition (delay histogram, control messages, acks, plans, workers).",
        {"200": Answer("text/plain exposition format."), **REFUSED},
    ),
    ("GET", "/openapi.yaml"): Operation(
        "This document.", {"200": Answer("application/yaml."), **REFUSED}
    ),
    ("POST", "/v1/control/workers"): Operation(
        "A worker process enrols: it gets a worker id (its pid unless that id is registered "
        "to another process, then an unused id from 4194304 on) and a secret of its own, "
        "which every later call naming that id must present (Swivel-Worker-Secret). An id "
        "that is taken is never handed out again while registered.",
        {"201": Answer("Enrolled.", WorkerIdentity), **BODY_REFUSED, "429": errors(FULL)},
        body=WorkerEnrolment,
    ),
    ("GET", "/v1/control/watch"): Operation(
        "Worker long-poll for the configuration snapshot; with `pid`, also the worker's "
        "heartbeat and the operators it hosts.",
        {
            "200": Answer("A snapshot whose revision differs from `since`.", Snapshot),
            "304": Answer("No change within the timeout."),
            "400": BAD_REQUEST,
            **REFUSED,
            "409": errors(
                "No worker with id `pid` is registered (the agent restarted or forgot it): "
                "enrol again (field: pid)."
            ),
            "422": IMPLAUSIBLE,
            "429": errors(FULL),
        },
        parameters=(
            query("since", {"type": "integer", "default": 0}, "The snapshot revision held."),
            query("pid", {"type": "integer"}, "The worker id it enrolled with; absent: read only."),
            {**SECRET, "description": "The secret of worker `pid` (required with `pid`)."},
            query("operators", {"type": "string"}, "Comma-separated operators it hosts."),
            WAIT,
        ),
    ),
    ("POST", "/v1/control/acks"): Operation(
        "Workers acknowledge a switch (records processed under a version, or armed on "
        "receipt); the whole body is validated before any ack is applied (400 names "
        "`[i].field`). A worker acks for itself only (403 for an ack naming another "
        "registered worker). The body may instead be an object with the acks and the "
        "worker's counts (rows and busy time per operator and partition since its last "
        "report, at most one a second), which the agent sums over a sliding window and "
        "serves in GET /v1/loads (`workers`).",
        {
            "202": Answer("Received.", Received),
            **BODY_REFUSED,
            "409": errors(
                "Not yet true (a worker id the agent does not know: enrol again; a batch the "
                "driver has not reported): retry."
            ),
            "422": IMPLAUSIBLE,
        },
        body=ACKS,
        parameters=(SECRET,),
    ),
    ("POST", "/v1/driver/progress"): Operation(
        "The driver runtime reports a micro-batch started or completed (a batch id at most "
        "1 000 000 beyond the last one reported).",
        {"202": Answer("Received.", Received), **BODY_REFUSED, "422": IMPLAUSIBLE},
        body=ProgressReport,
    ),
    ("POST", "/v1/driver/migration"): Operation(
        "The driver reports a bin migration's progress (move-bins, request-executors); "
        "planId must be a plan of this agent (422).",
        {"202": Answer("Received.", Received), **BODY_REFUSED, "422": IMPLAUSIBLE},
        body=MigrationReport,
    ),
    ("POST", "/v1/driver/loads"): Operation(
        "The driver's latest load measurement for the bin policies (per-bin records and "
        "state size, per-executor busy time and memory); replaces the previous one.",
        {"202": Answer("Kept; served at /v1/loads and in /metrics.", Received), **BODY_REFUSED},
        body=LoadMeasurement,
    ),
    ("POST", "/v1/driver/coordination"): Operation(
        "The driver applied a coordination interval (the `set-coordination` action of a "
        "Reconfiguration with `coordination`); completes that plan.",
        {"202": Answer("Received.", Received), **BODY_REFUSED, "422": IMPLAUSIBLE},
        body=CoordinationReport,
    ),
    ("POST", "/v1/driver/prewarm-check"): Operation(
        "The prewarm helper's round trip once the query committed a batch with state: per "
        "live executor, `answered` or why not; replaces the previous one. Served in "
        "/v1/config's `prewarmCheck`, which the operator shows as the StreamJob's "
        "`PrewarmReady` condition.",
        {"202": Answer("Kept; served in /v1/config.", Received), **BODY_REFUSED},
        body=PrewarmCheck,
    ),
    ("GET", "/v1/loads"): Operation(
        "The latest load measurement (what the operator's policy timers read).",
        {
            "200": Answer(
                "The driver's document plus `receivedAt` (agent clock) and `ageSeconds`, "
                "and `workers`: the workers' counts over the agent's sliding window.",
                ServedLoads,
            ),
            **REFUSED,
            "404": errors("No measurement since the driver started or bins last moved."),
        },
    ),
    ("GET", "/v1/driver/actions"): Operation(
        "Driver long-poll for boundary actions (restart, move-bins, request-executors, "
        "kill-executors, set-coordination).",
        {
            "200": Answer("The oldest action not yet done with seq > since.", DriverAction),
            "304": Answer("No action within the timeout."),
            "400": BAD_REQUEST,
            **REFUSED,
        },
        parameters=(SINCE, WAIT),
        description=(
            "Actions already done are never handed out again: a migration action once its "
            "plan's migration report is Completed/Failed, set-coordination once confirmed, "
            "any action of a finished plan, and an action the driver reported with POST "
            "/v1/driver/actions/done. A restarted driver polls from since=0 and gets only "
            "the actions still to be carried out (those of a plan still Applying, once)."
        ),
    ),
    ("POST", "/v1/driver/actions/done"): Operation(
        "The driver carried out action `seq` (restart, kill-executors: actions without a "
        "progress report); durable, never handed out again.",
        {"200": Answer("Marked done.", ActionMarked), **BODY_REFUSED},
        body=ActionDone,
    ),
    ("POST", "/v1/plans"): Operation(
        "Submit a reconfiguration; planned, made durable and published at once. A "
        "submission with the idempotencyKey of an earlier one gets that plan back (200, "
        "same id, whatever its phase), across agent restarts.",
        {
            "200": Answer(
                "The plan an earlier submission with the same idempotencyKey created.",
                PlanDocument,
            ),
            "202": Answer("Accepted and applying.", PlanDocument),
            **BODY_REFUSED,
            "409": errors("Another plan is in flight; `runningPlan` names it."),
            "422": errors(
                "Well formed, but names an operator (or bins, job) the job does not have, or "
                "plans a switch Spark cannot carry out consistently (docs/planning.md); "
                "nothing is published."
            ),
        },
        body=SubmissionBody,
    ),
    ("GET", "/v1/plans/{plan_id}"): Operation(
        "A plan's phase, progress and timings; with `since`, a long-poll for its next "
        "change. A read never changes the plan (acks, driver reports and the agent's own "
        "clock do).",
        {
            "200": Answer(
                "The plan; with `since`, once its revision differs, or unchanged after `timeout`.",
                PlanDocument,
            ),
            "400": BAD_REQUEST,
            **REFUSED,
            "404": errors("No such plan."),
        },
        parameters=(
            {"name": "plan_id", "in": "path", "required": True, "schema": {"type": "string"}},
            query("since", {"type": "integer"}, "The `revision` held; absent: answer at once."),
            query(
                "timeout",
                {"type": "number", "default": 0, "maximum": MAX_PLAN_WAIT_S},
                "With `since`: seconds to wait for a document whose revision differs.",
            ),
        ),
    ),
    ("GET", "/v1/config"): Operation(
        "The live configuration (the current snapshot) and the active plan.",
        {
            "200": Answer("The snapshot, the plan in flight and the driver's facts.", LiveConfig),
            **REFUSED,
        },
    ),
    ("GET", "/v1/topology"): Operation(
        "The job's operators and the live worker processes hosting them.",
        {"200": Answer("The topology.", Topology), **REFUSED},
    ),
}
