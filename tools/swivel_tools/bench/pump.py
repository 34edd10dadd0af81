"""What the control channel costs a running job: snapshots pushed to every worker at a
fixed rate while the query runs, against none.

A stand-in for the agent's worker and driver routes (same paths, same wire format): it
re-publishes the job's unchanged configuration `rate` times per second with a new
`revision`, so each Python worker's real control client receives, parses and installs a
snapshot every 1/rate s, and the operator wrappers check it between Arrow batches as
usual - but no configuration changes, so batch times compare like with like. It listens
on a port of its own: a reused Python worker's control client follows the agent URL of the
query it serves (`swivel.jobs.control.client.get_client`), so a job run afterwards on the
same session talks to its own agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from concurrent.futures import Future
from typing import Any

from aiohttp import web

from swivel.protocol.snapshots import Snapshot


class ControlPump:
    def __init__(self, snapshot: Snapshot, port: int, token: str) -> None:
        self._wire = snapshot.to_wire()
        self.port, self.token = port, token
        self.rate = 0.0
        self.revision = snapshot.revision
        self._loop = asyncio.new_event_loop()
        self._changed: asyncio.Event | None = None
        self._runner: web.AppRunner | None = None
        self._publisher: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ControlPump:
        threading.Thread(target=self._loop.run_forever, daemon=True, name="pump").start()
        self._run(self._serve())
        return self

    def _run(self, coroutine: Any) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(timeout=10)

    async def _serve(self) -> None:
        self._changed = asyncio.Event()
        app = web.Application()
        app.router.add_get("/v1/control/watch", self._watch)
        app.router.add_post("/v1/control/acks", self._accepted)
        app.router.add_post("/v1/driver/progress", self._accepted)
        app.router.add_get("/v1/driver/actions", self._no_actions)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        self._publisher = asyncio.get_running_loop().create_task(self._publish_forever())

    async def _publish_forever(self) -> None:
        while True:
            await asyncio.sleep(1.0 / self.rate if self.rate else 0.05)
            if self.rate and self._changed is not None:
                self.revision += 1
                self._changed.set()
                self._changed = asyncio.Event()

    def _authorised(self, request: web.Request) -> bool:
        return request.headers.get("Authorization") == f"Bearer {self.token}"

    async def _watch(self, request: web.Request) -> web.Response:
        if not self._authorised(request):
            return web.Response(status=401)
        since = int(request.query.get("since", "-1"))
        timeout = min(float(request.query.get("timeout", "20")), 60.0)
        if since == self.revision and self._changed is not None:
            try:
                await asyncio.wait_for(self._changed.wait(), timeout)
            except TimeoutError:
                return web.Response(status=304)
        body = {**self._wire, "revision": self.revision}
        return web.Response(body=json.dumps(body), content_type="application/json")

    async def _accepted(self, request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=202)

    async def _no_actions(self, request: web.Request) -> web.Response:
        await asyncio.sleep(min(float(request.query.get("timeout", "20")), 1.0))
        return web.Response(status=304)

    async def _shutdown(self) -> None:
        if self._publisher is not None:
            self._publisher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._publisher
        if self._runner is not None:
            await self._runner.cleanup()

    def stop(self) -> None:
        self._run(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
