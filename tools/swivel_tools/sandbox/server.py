"""The aiohttp application and the ways to run it: in a loop, in a thread, or as a process.

`make_app()` builds the application; `serve()` starts it on 127.0.0.1 (an ephemeral port
by default) inside the running loop and returns a handle; `SandboxThread` does the same on
a background thread for synchronous tests and clients (the `kubernetes` client, kubectl).

Components are the extension point for things that act on the stored objects beside the
API — the planned process kubelet is the first: `serve(components=[kubelet])` runs each
component's `run(registry)` on the server's loop until the server stops, where it can
`registry.watch(...)` pods and write their status through the same registry calls the
HTTP handlers use.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from aiohttp import web

from swivel_tools.sandbox import discovery, handlers, openapi, routing
from swivel_tools.sandbox.errors import ApiError
from swivel_tools.sandbox.handlers import BOOKMARK_INTERVAL, REGISTRY
from swivel_tools.sandbox.registry import Registry
from swivel_tools.sandbox.store import DEFAULT_HISTORY_LIMIT, Store

logger = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_BOOKMARK_INTERVAL = 60.0  # seconds; the real server sends one about every minute
REQUESTS = web.AppKey("requests", collections.Counter[str])
VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


class Component(Protocol):
    """Something that runs beside the API on the server's loop (e.g. a process kubelet)."""

    async def run(self, registry: Registry) -> None: ...


@web.middleware
async def _statuses(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Every failure leaves as a Status object, as clients expect."""
    try:
        return await handler(request)
    except ApiError as error:
        return web.json_response(error.status(), status=error.code)
    except web.HTTPException:
        raise
    except Exception as error:  # a bug in the sandbox: say so, do not hang the client
        logger.exception("sandbox failed on %s %s", request.method, request.path)
        failure = ApiError(500, "InternalError", f"sandbox internal error: {error!r}")
        return web.json_response(failure.status(), status=500)


@web.middleware
async def _counting(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Count API requests by client (the User-Agent's product), verb and resource
    (`GET /sandbox/requests` serves the counts): how many round trips a client makes,
    e.g. per reconciliation."""
    route = routing.parse(request.path.rstrip("/"))
    if route is not None and route.plural is not None:
        verb = VERBS.get(request.method, request.method.lower())
        if request.method == "GET":
            watching = request.query.get("watch") in ("true", "1")
            verb = "get" if route.name else "watch" if watching else "list"
        resource = route.plural + (f"/{route.subresource}" if route.subresource else "")
        client = request.headers.get("User-Agent", "-").split("/", 1)[0].split(" ", 1)[0]
        request.app[REQUESTS][f"{client} {verb} {resource}"] += 1
    return await handler(request)


async def _requests(request: web.Request) -> web.Response:
    return web.json_response(dict(sorted(request.app[REQUESTS].items())))


def _not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource")


async def _api(request: web.Request) -> web.StreamResponse:
    registry = request.app[REGISTRY]
    path = request.path.rstrip("/")
    if path == "/api":
        return web.json_response(discovery.core_versions())
    if path == "/apis":
        return web.json_response(discovery.group_list(registry.catalogue))
    parts = path.strip("/").split("/")
    if len(parts) == 2 and parts[0] == "apis":
        found = discovery.group(registry.catalogue, parts[1])
        if found is None:
            raise _not_found()
        return web.json_response(found)
    route = routing.parse(path)
    if route is None:
        raise _not_found()
    if route.plural is None:
        if request.method != "GET":
            raise ApiError(405, "MethodNotAllowed", f"{request.method} is not allowed here")
        listing = discovery.resource_list(registry.catalogue, route.group, route.version)
        if listing is None:
            raise _not_found()
        return web.json_response(listing)
    return await handlers.handle(request, route)


async def _openapi_v3(request: web.Request) -> web.Response:
    catalogue = request.app[REGISTRY].catalogue
    tail = request.match_info.get("tail", "")
    found = openapi.document(catalogue, tail) if tail else openapi.root(catalogue)
    if found is None:
        raise _not_found()
    return web.json_response(found)


async def _version(_: web.Request) -> web.Response:
    return web.json_response(discovery.version())


async def _healthy(_: web.Request) -> web.Response:
    return web.Response(text="ok")


async def _unknown(_: web.Request) -> web.Response:
    raise _not_found()


def make_app(
    registry: Registry | None = None,
    *,
    history_limit: int = DEFAULT_HISTORY_LIMIT,
    bookmark_interval: float = DEFAULT_BOOKMARK_INTERVAL,
) -> web.Application:
    app = web.Application(middlewares=[_counting, _statuses], client_max_size=16 * 1024**2)
    app[REGISTRY] = registry or Registry(Store(history_limit))
    app[REQUESTS] = collections.Counter()
    app[BOOKMARK_INTERVAL] = bookmark_interval
    app.router.add_get("/version", _version)
    for probe in ("/healthz", "/livez", "/readyz"):
        app.router.add_get(probe, _healthy)
    for prefix in ("/api", "/apis"):
        app.router.add_route("*", prefix, _api)
        app.router.add_route("*", prefix + "/{tail:.*}", _api)
    app.router.add_get("/sandbox/requests", _requests)
    app.router.add_get("/openapi/v3", _openapi_v3)
    app.router.add_get("/openapi/v3/{tail:.*}", _openapi_v3)
    app.router.add_route("*", "/{tail:.*}", _unknown)  # /openapi/v2 and anything else
    return app


@dataclass
class RunningSandbox:
    """A started server: its URL, its registry (for in-process use) and how to stop it."""

    host: str
    port: int
    registry: Registry
    runner: web.AppRunner
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.runner.cleanup()


async def serve(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    history_limit: int = DEFAULT_HISTORY_LIMIT,
    bookmark_interval: float = DEFAULT_BOOKMARK_INTERVAL,
    components: Iterable[Component] = (),
) -> RunningSandbox:
    """Start the sandbox in the running loop; port 0 picks a free port."""
    app = make_app(history_limit=history_limit, bookmark_interval=bookmark_interval)
    # Watches end when their client goes: cancel handlers on disconnect, and do not wait
    # for open watches on shutdown.
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.5, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1]
    registry = app[REGISTRY]
    running = RunningSandbox(host, bound, registry, runner)
    running.tasks = [asyncio.create_task(component.run(registry)) for component in components]
    return running


class SandboxThread:
    """The sandbox on its own thread and loop, for synchronous code. Use as a context manager."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name="swivel-sandbox", daemon=True)
        self._running: RunningSandbox | None = None
        self._failure: BaseException | None = None

    def _main(self) -> None:
        self._loop = loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            self._running = loop.run_until_complete(serve(**self._options))
        except BaseException as error:
            self._failure = error
        finally:
            self._ready.set()
        if self._running is not None:
            loop.run_forever()
        loop.close()

    def start(self, timeout: float = 10.0) -> SandboxThread:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("the sandbox did not start in time")
        if self._failure is not None:
            raise RuntimeError("the sandbox failed to start") from self._failure
        return self

    @property
    def running(self) -> RunningSandbox:
        assert self._running is not None, "start() the sandbox first"
        return self._running

    @property
    def url(self) -> str:
        return self.running.url

    def call(self, function: Callable[[Registry], T], timeout: float = 10.0) -> T:
        """Run `function(registry)` on the server's loop (the store is not thread-safe)."""

        async def on_loop() -> T:
            return function(self.running.registry)

        assert self._loop is not None, "start() the sandbox first"
        return asyncio.run_coroutine_threadsafe(on_loop(), self._loop).result(timeout)

    def close(self, timeout: float = 10.0) -> None:
        loop = self._loop
        if self._running is not None and loop is not None and loop.is_running():
            asyncio.run_coroutine_threadsafe(self._running.close(), loop).result(timeout)
            loop.call_soon_threadsafe(loop.stop)
        if self._thread.is_alive():
            self._thread.join(timeout)

    def __enter__(self) -> SandboxThread:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.close()
