"""The agent's HTTP face: routes of docs/control-protocol.md on one aiohttp application.

Handlers only translate between HTTP and the hub. Bad input is answered with
`{"errors": [{"field", "reason"}]}` (400 malformed, 401 token, 403 a role that may not call
the route or a worker id whose secret the caller lacks, 409 busy, 413 too large, 422
unknown to the job) and never reaches the running job: every body is read by `read_json`
and validated against its model (`swivel.protocol`) before the hub changes anything.
Every answer is rendered from its model too, and openapi.yaml is generated from the models
and `ROUTES` (`swivel openapi`). Which role calls which route is the `ROUTES` table
(auth.py says why).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

from aiohttp import web

from swivel.api.errors import FieldProblem
from swivel.jobs.agent.acks import AcksRejected, parse_report
from swivel.jobs.agent.auth import Handler, Role, bearer_auth
from swivel.jobs.agent.hub import Hub
from swivel.jobs.agent.intake import PlanRejected
from swivel.jobs.agent.loads import LoadsRejected
from swivel.jobs.control.identity import WORKER_SECRET_HEADER
from swivel.protocol.answers import (
    ActionMarked,
    Errors,
    Health,
    LiveConfig,
    Received,
    WorkerIdentity,
)
from swivel.protocol.bodies import (
    ActionDone,
    CoordinationReport,
    MigrationReport,
    PrewarmCheck,
    ProgressReport,
    WorkerEnrolment,
)
from swivel.protocol.documents import (
    MAX_PID,
    MAX_PLAN_WAIT_S,
    BodyRejected,
    Document,
    query_int,
    query_seconds,
    read_json,
)

OPENAPI_PATH = Path(__file__).with_name("openapi.yaml")
MAX_WATCH_TIMEOUT_S = 60.0
TICK_INTERVAL_S = 0.5
HUB_KEY = web.AppKey("hub", Hub)
# The largest honest body: a worker's full ack queue (10 000 acks of ~200 bytes) or the
# loads of many bins; anything larger is refused (413) before it is read.
MAX_BODY_BYTES = 4 * 2**20
log = logging.getLogger(__name__)


def _errors(status: int, problems: Iterable[FieldProblem]) -> web.Response:
    return _answer(Errors.of(problems), status)


def _answer(document: Document, status: int = 200) -> web.Response:
    return web.json_response(document.to_wire(), status=status)


@web.middleware
async def bad_request_as_json(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except BodyRejected as error:
        return _errors(error.status, error.problems)
    except web.HTTPRequestEntityTooLarge:
        return _errors(413, [FieldProblem("body", f"larger than {MAX_BODY_BYTES} bytes")])
    except PlanRejected as error:
        return _answer(error.document(), error.status)
    except LoadsRejected as error:
        return _errors(400, error.problems)
    except AcksRejected as error:
        return _errors(error.status, error.problems)


async def _json_body(request: web.Request) -> Any:
    return read_json(await request.read())  # 413 past client_max_size, BodyRejected (400)


def _since(request: web.Request) -> int:
    return query_int(request.query.get("since"), "since", 0)


def _timeout(request: web.Request, default: float) -> float:
    return query_seconds(request.query.get("timeout"), "timeout", default, MAX_WATCH_TIMEOUT_S)


async def healthz(request: web.Request) -> web.Response:
    return _answer(Health(status="ok"))


async def readyz(request: web.Request) -> web.Response:
    ready = request.app[HUB_KEY].ready
    status = "ready" if ready else "waiting for the driver's first progress report"
    return _answer(Health(status=status), 200 if ready else 503)


async def metrics(request: web.Request) -> web.Response:
    hub = request.app[HUB_KEY]  # read only: the periodic `_ticker` keeps the gauges current
    response = web.Response(body=hub.metrics.exposition())
    response.headers["Content-Type"] = hub.metrics.content_type
    return response


async def openapi(request: web.Request) -> web.Response:
    return web.Response(
        text=OPENAPI_PATH.read_text(encoding="utf-8"), content_type="application/yaml"
    )


async def enrol_worker(request: web.Request) -> web.Response:
    """A worker process's own identity: the id it got and the secret only it holds."""
    enrolment = WorkerEnrolment.parse(await _json_body(request))
    worker_id, secret = request.app[HUB_KEY].registry.enrol(enrolment.pid)  # 429 when full
    return _answer(WorkerIdentity(pid=worker_id, secret=secret), 201)


def _speaks_for(request: web.Request, pids: dict[int, str]) -> None:
    """BodyRejected (403) unless the request carries the secret of every registered worker
    it names (`pids`: worker id -> the field naming it). Unknown ids pass: the route says
    why (the watch 409 "enrol", an ack 409 "watch first")."""
    registry = request.app[HUB_KEY].registry
    presented = request.headers.get(WORKER_SECRET_HEADER)
    problems = [
        problem
        for pid, field in pids.items()
        if (problem := registry.authenticate(pid, presented, field)) is not None
    ]
    if problems:
        request.app[HUB_KEY].metrics.rejected.labels("identity").inc()
        raise BodyRejected(problems, 403)


async def watch(request: web.Request) -> web.Response:
    hub = request.app[HUB_KEY]
    raw_pid = request.query.get("pid")
    pid = None if raw_pid in (None, "", "-1") else query_int(raw_pid, "pid", 0, upper=MAX_PID)
    operators = hub.known_operators(request.query.get("operators", ""))  # 422 when not the job's
    if pid is not None:
        _speaks_for(request, {pid: "pid"})
        if not hub.registry.registered(pid):
            reason = "no worker with this id is registered; POST /v1/control/workers first"
            raise BodyRejected.single("pid", reason, 409)
    body = await hub.watch(_since(request), pid, operators, _timeout(request, 20.0))
    if body is None:
        return web.Response(status=304)
    return web.Response(body=body, content_type="application/json")


async def acks(request: web.Request) -> web.Response:
    body = await _json_body(request)
    parsed, counts = parse_report(body)  # AcksRejected (400) before any is applied
    prefix = "acks" if isinstance(body, dict) else ""
    named: dict[int, str] = {}
    for i, ack in enumerate(parsed):
        named.setdefault(ack.pid, f"{prefix}[{i}].pid")
    for i, report in enumerate(counts):
        named.setdefault(report.pid, f"counts[{i}].pid")
    _speaks_for(request, named)  # 403: another worker's acks or counts
    request.app[HUB_KEY].record_report(parsed, counts, prefix)
    return _answer(Received(received=len(parsed) + len(counts)), 202)


async def driver_progress(request: web.Request) -> web.Response:
    report = ProgressReport.parse(await _json_body(request))
    request.app[HUB_KEY].record_progress(report)
    return _answer(Received(received=1), 202)


async def driver_migration(request: web.Request) -> web.Response:
    body = await _json_body(request)
    MigrationReport.parse(body)  # kept as reported once valid
    request.app[HUB_KEY].record_migration(body)
    return _answer(Received(received=1), 202)


async def driver_loads(request: web.Request) -> web.Response:
    request.app[HUB_KEY].record_loads(await _json_body(request))
    return _answer(Received(received=1), 202)


async def driver_coordination(request: web.Request) -> web.Response:
    report = CoordinationReport.parse(await _json_body(request))
    request.app[HUB_KEY].record_coordination(report)
    return _answer(Received(received=1), 202)


async def driver_prewarm_check(request: web.Request) -> web.Response:
    check = PrewarmCheck.parse(await _json_body(request))
    request.app[HUB_KEY].record_prewarm_check(check)
    return _answer(Received(received=1), 202)


async def loads(request: web.Request) -> web.Response:
    document = request.app[HUB_KEY].loads()
    if document is None:
        reason = "the driver has not reported loads since it started or bins last moved"
        return _errors(404, [FieldProblem("loads", reason)])
    return web.json_response(document)


async def driver_actions(request: web.Request) -> web.Response:
    hub = request.app[HUB_KEY]
    action = await hub.next_driver_action(_since(request), _timeout(request, 20.0))
    if action is None:
        return web.Response(status=304)
    return web.json_response(action)


async def driver_action_done(request: web.Request) -> web.Response:
    done = ActionDone.parse(await _json_body(request))
    known = request.app[HUB_KEY].action_done(done.seq)
    return _answer(ActionMarked(seq=done.seq, known=known))


async def submit_plan(request: web.Request) -> web.Response:
    hub = request.app[HUB_KEY]
    record, created = hub.accept(await _json_body(request))
    document = hub.plan_document(record)
    # 202: a new plan; 200: the plan an earlier submission with this idempotencyKey created.
    status = 202 if created else 200
    return web.json_response(
        document, status=status, headers={"Location": f"/v1/plans/{record.id}"}
    )


async def get_plan(request: web.Request) -> web.Response:
    """The plan's document; with `since` (a revision the caller holds) a long-poll of up to
    `timeout` seconds for a document whose revision differs, the unchanged one after it.
    A read: the plan moves on from acks, driver reports and the periodic `_ticker`."""
    query = request.query
    since = query_int(query["since"], "since", 0) if query.get("since") else None
    timeout = query_seconds(query.get("timeout"), "timeout", 0.0, MAX_PLAN_WAIT_S)
    document = await request.app[HUB_KEY].wait_plan(request.match_info["plan_id"], since, timeout)
    if document is None:
        return _errors(404, [FieldProblem("id", "no such plan")])
    return web.json_response(document)


async def config(request: web.Request) -> web.Response:
    hub = request.app[HUB_KEY]
    active = hub.active_plan
    document = LiveConfig(
        **dict(hub.snapshot),
        active_plan=active.id if active else None,
        coordination_interval_seconds=hub.coordination_interval(),
        # Where a corrupt state file was moved at start (docs/agent.md), else null.
        state_recovered_from=str(hub.state_recovered_from or "") or None,
        prewarm_check=hub.prewarm_check,
    )
    return _answer(document)


async def topology(request: web.Request) -> web.Response:
    return web.json_response(request.app[HUB_KEY].topology())


OPERATOR, DRIVER, WORKER = (frozenset({r}) for r in (Role.OPERATOR, Role.DRIVER, Role.WORKER))
EVERYONE = frozenset(Role)

# method, path, handler, the roles that may call it. The operator submits and reads; the
# driver reports and takes boundary actions (and reads its plan and the configuration a
# restarted driver resumes with); the workers enrol, long-poll snapshots and ack (each
# worker for itself: `_speaks_for`). Nobody else's route is open to a role: a worker's
# code cannot submit, fail or complete a plan.
ROUTES: tuple[tuple[str, str, Callable[[web.Request], Any], frozenset[Role]], ...] = (
    ("GET", "/healthz", healthz, EVERYONE),
    ("GET", "/readyz", readyz, EVERYONE),
    ("GET", "/metrics", metrics, OPERATOR),
    ("GET", "/openapi.yaml", openapi, EVERYONE),
    ("POST", "/v1/control/workers", enrol_worker, WORKER | DRIVER),
    ("GET", "/v1/control/watch", watch, WORKER | DRIVER),
    ("POST", "/v1/control/acks", acks, WORKER),
    ("POST", "/v1/driver/progress", driver_progress, DRIVER),
    ("GET", "/v1/driver/actions", driver_actions, DRIVER),
    ("POST", "/v1/driver/actions/done", driver_action_done, DRIVER),
    ("POST", "/v1/driver/migration", driver_migration, DRIVER),
    ("POST", "/v1/driver/loads", driver_loads, DRIVER),
    ("POST", "/v1/driver/coordination", driver_coordination, DRIVER),
    ("POST", "/v1/driver/prewarm-check", driver_prewarm_check, DRIVER),
    ("GET", "/v1/loads", loads, OPERATOR),
    ("POST", "/v1/plans", submit_plan, OPERATOR),
    ("GET", "/v1/plans/{plan_id}", get_plan, OPERATOR | DRIVER),
    ("GET", "/v1/config", config, OPERATOR | DRIVER),
    ("GET", "/v1/topology", topology, OPERATOR),
)
_ROLES = {handler: roles for _, _, handler, roles in ROUTES}


def _roles_of(request: web.Request) -> frozenset[Role] | None:
    return _ROLES.get(request.match_info.route.handler)


@web.middleware
async def last_resort(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A bug must not leak a traceback to a caller: logged here, a bare 500 there. Bad input
    never gets this far (every route validates its input); this is not how it is refused."""
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except Exception:
        log.exception("agent error on %s %s", request.method, request.path)
        reason = "the agent failed on this request; its log has the details"
        return _errors(500, [FieldProblem("", reason)])


async def _ticker(app: web.Application) -> AsyncIterator[None]:
    # Completion can also come from time alone: a dead worker ages out, a plan times out.
    # This task is the only place time moves the hub; no GET changes state.
    async def loop() -> None:
        while True:
            await asyncio.sleep(TICK_INTERVAL_S)
            app[HUB_KEY].tick()

    task = asyncio.create_task(loop())
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def create_app(hub: Hub, token: str) -> web.Application:
    """The agent's application; `token` is the operator's (auth.py derives the others)."""
    app = web.Application(
        middlewares=[last_resort, bearer_auth(token, _roles_of), bad_request_as_json],
        client_max_size=MAX_BODY_BYTES,
    )
    app[HUB_KEY] = hub
    for method, path, handler, _ in ROUTES:
        app.router.add_route(method, path, handler)
    app.cleanup_ctx.append(_ticker)
    return app
