"""The agent's HTTP face: routes of docs/control-protocol.md on one aiohttp application.

Handlers only translate between HTTP and the hub. Bad input is answered with
`{"errors": [{"field", "reason"}]}` (400 malformed, 401 token, 409 busy, 422 unknown to the
job) and never reaches the running job.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from swivel.jobs.agent.acks import AcksRejected
from swivel.jobs.agent.auth import Handler, bearer_auth
from swivel.jobs.agent.hub import Hub
from swivel.jobs.agent.loads import LoadsRejected
from swivel.jobs.agent.submissions import PlanRejected

OPENAPI_PATH = Path(__file__).with_name("openapi.yaml")
MAX_WATCH_TIMEOUT_S = 60.0
TICK_INTERVAL_S = 0.5
HUB_KEY = web.AppKey("hub", Hub)


class BadRequestError(Exception):
    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field, self.reason = field, reason


def _errors(status: int, problems: list[dict[str, str]], **extra: Any) -> web.Response:
    return web.json_response({"errors": problems, **extra}, status=status)


@web.middleware
async def bad_request_as_json(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except BadRequestError as error:
        return _errors(400, [{"field": error.field, "reason": error.reason}])
    except PlanRejected as error:
        return web.json_response(error.to_json(), status=error.status)
    except (LoadsRejected, AcksRejected) as error:
        return _errors(400, [{"field": p.field, "reason": p.reason} for p in error.problems])


def _int_query(request: web.Request, name: str, default: int) -> int:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise BadRequestError(name, f"expected an integer, got {raw!r}") from None


def _timeout_query(request: web.Request, default: float) -> float:
    raw = request.query.get("timeout")
    try:
        value = default if raw is None else float(raw)
    except ValueError:
        raise BadRequestError("timeout", f"expected seconds, got {raw!r}") from None
    return min(max(value, 0.0), MAX_WATCH_TIMEOUT_S)


async def _json_body(request: web.Request) -> Any:
    try:
        return json.loads(await request.read())
    except (ValueError, UnicodeDecodeError) as error:
        raise BadRequestError("body", f"not valid JSON: {error}") from None


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    ready = request.app[HUB_KEY].ready
    body = {"status": "ready" if ready else "waiting for the driver's first progress report"}
    return web.json_response(body, status=200 if ready else 503)


async def metrics(request: web.Request) -> web.Response:
    hub = request.app[HUB_KEY]
    hub.tick()
    response = web.Response(body=hub.metrics.exposition())
    response.headers["Content-Type"] = hub.metrics.content_type
    return response


async def openapi(request: web.Request) -> web.Response:
    return web.Response(
        text=OPENAPI_PATH.read_text(encoding="utf-8"), content_type="application/yaml"
    )


async def watch(request: web.Request) -> web.Response:
    hub = request.app[HUB_KEY]
    since = _int_query(request, "since", 0)
    pid = _int_query(request, "pid", -1)
    operators = [op for op in request.query.get("operators", "").split(",") if op]
    body = await hub.watch(
        since, None if pid < 0 else pid, operators, _timeout_query(request, 20.0)
    )
    if body is None:
        return web.Response(status=304)
    return web.Response(body=body, content_type="application/json")


async def acks(request: web.Request) -> web.Response:
    body = await _json_body(request)
    request.app[HUB_KEY].record_acks(body)  # AcksRejected (400) before any is applied
    return web.json_response({"received": len(body)}, status=202)


async def driver_progress(request: web.Request) -> web.Response:
    body = await _json_body(request)
    if not isinstance(body, dict):
        raise BadRequestError("body", "expected a JSON object")
    if not isinstance(body.get("batchId"), int):
        raise BadRequestError("batchId", "required: an integer")
    if body.get("event") not in ("started", "completed"):
        raise BadRequestError("event", "one of started, completed")
    request.app[HUB_KEY].record_progress(body)
    return web.json_response({"received": 1}, status=202)


async def driver_migration(request: web.Request) -> web.Response:
    body = await _json_body(request)
    if not isinstance(body, dict) or not isinstance(body.get("planId"), str):
        raise BadRequestError("planId", "required: the plan id of the migration")
    request.app[HUB_KEY].record_migration(body)
    return web.json_response({"received": 1}, status=202)


async def driver_loads(request: web.Request) -> web.Response:
    request.app[HUB_KEY].record_loads(await _json_body(request))
    return web.json_response({"received": 1}, status=202)


async def driver_coordination(request: web.Request) -> web.Response:
    body = await _json_body(request)
    if not isinstance(body, dict):
        raise BadRequestError("body", "expected a JSON object")
    interval = body.get("intervalSeconds")
    if isinstance(interval, bool) or not isinstance(interval, int | float) or not interval > 0:
        raise BadRequestError("intervalSeconds", "required: a positive number")
    plan_id = body.get("planId")
    if plan_id is not None and not isinstance(plan_id, str):
        raise BadRequestError("planId", "a plan id or null")
    request.app[HUB_KEY].record_coordination(body)
    return web.json_response({"received": 1}, status=202)


async def loads(request: web.Request) -> web.Response:
    document = request.app[HUB_KEY].loads()
    if document is None:
        reason = "the driver has not reported loads since it started or bins last moved"
        return _errors(404, [{"field": "loads", "reason": reason}])
    return web.json_response(document)


async def driver_actions(request: web.Request) -> web.Response:
    hub = request.app[HUB_KEY]
    since = _int_query(request, "since", 0)
    action = await hub.next_driver_action(since, _timeout_query(request, 20.0))
    if action is None:
        return web.Response(status=304)
    return web.json_response(action)


async def driver_action_done(request: web.Request) -> web.Response:
    body = await _json_body(request)
    if not isinstance(body, dict) or not isinstance(body.get("seq"), int):
        raise BadRequestError("seq", "required: the seq of the action carried out")
    known = request.app[HUB_KEY].action_done(body["seq"])
    return web.json_response({"seq": body["seq"], "known": known})


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
    hub = request.app[HUB_KEY]
    record = hub.plan(request.match_info["plan_id"])
    if record is None:
        return _errors(404, [{"field": "id", "reason": "no such plan"}])
    hub.check_plan()
    return web.json_response(hub.plan_document(hub.plan(record.id) or record))


async def config(request: web.Request) -> web.Response:
    hub = request.app[HUB_KEY]
    active = hub.active_plan
    document = {
        **hub.snapshot.to_json(),
        "activePlan": active.id if active else None,
        "coordinationIntervalSeconds": hub.coordination_interval(),
    }
    return web.json_response(document)


async def topology(request: web.Request) -> web.Response:
    return web.json_response(request.app[HUB_KEY].topology())


ROUTES: tuple[tuple[str, str, Callable[[web.Request], Any]], ...] = (
    ("GET", "/healthz", healthz),
    ("GET", "/readyz", readyz),
    ("GET", "/metrics", metrics),
    ("GET", "/openapi.yaml", openapi),
    ("GET", "/v1/control/watch", watch),
    ("POST", "/v1/control/acks", acks),
    ("POST", "/v1/driver/progress", driver_progress),
    ("GET", "/v1/driver/actions", driver_actions),
    ("POST", "/v1/driver/actions/done", driver_action_done),
    ("POST", "/v1/driver/migration", driver_migration),
    ("POST", "/v1/driver/loads", driver_loads),
    ("POST", "/v1/driver/coordination", driver_coordination),
    ("GET", "/v1/loads", loads),
    ("POST", "/v1/plans", submit_plan),
    ("GET", "/v1/plans/{plan_id}", get_plan),
    ("GET", "/v1/config", config),
    ("GET", "/v1/topology", topology),
)


async def _ticker(app: web.Application) -> AsyncIterator[None]:
    # Completion can also come from time alone: a dead worker ages out, a plan times out.
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
    app = web.Application(middlewares=[bearer_auth(token), bad_request_as_json])
    app[HUB_KEY] = hub
    for method, path, handler in ROUTES:
        app.router.add_route(method, path, handler)
    app.cleanup_ctx.append(_ticker)
    return app
