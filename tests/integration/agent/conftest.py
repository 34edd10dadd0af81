"""A real agent (hub + aiohttp app) on 127.0.0.1, served from a background event loop.

Tests talk to it over HTTP only, like workers, the driver and the CLI do; worker-like
clients are the real `swivel.jobs.control.client.ControlClient` in threads or processes.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from swivel.api.manifests import load_streamjob
from swivel.api.streamjob import StreamJob
from swivel.jobs.agent.app import create_app
from swivel.jobs.agent.auth import Role, role_token
from swivel.jobs.agent.hub import Hub
from swivel.jobs.agent.store import StateStore
from swivel.jobs.control.client import ControlClient
from swivel.jobs.control.identity import WORKER_SECRET_HEADER
from tests.polling import wait_for

ROOT = Path(__file__).resolve().parents[3]
JOB_PATH = ROOT / "examples" / "fraud-detection" / "streamjob.yaml"
TOKEN = "test-token-7f3a"  # the operator's
DRIVER_TOKEN = role_token(TOKEN, Role.DRIVER)
WORKER_TOKEN = role_token(TOKEN, Role.WORKER)
AUTO = "<the token of the role that calls the route>"


def token_for(path: str) -> str:
    """The credential of the role that calls `path`: the driver's, a worker's, else the
    operator's (jobs/agent/app.py ROUTES)."""
    if path.startswith("/v1/driver/"):
        return DRIVER_TOKEN
    if path.startswith("/v1/control/"):
        return WORKER_TOKEN
    return TOKEN


class AgentServer:
    """One agent on its own loop thread; `stop()` then a new one on the same port = restart."""

    def __init__(
        self,
        job: StreamJob,
        state_dir: Path,
        port: int = 0,
        *,
        ssl_context: ssl.SSLContext | None = None,
        **hub_options: Any,
    ) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.hub: Hub = self._run(self._make_hub(job, state_dir, hub_options))
        self._runner = web.AppRunner(
            create_app(self.hub, TOKEN), access_log=None, shutdown_timeout=0.5
        )
        self._run(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", port, ssl_context=ssl_context)
        self._run(site.start())
        server = site._server
        assert server is not None and server.sockets
        self.port = server.sockets[0].getsockname()[1]
        self.url = f"{'https' if ssl_context else 'http'}://127.0.0.1:{self.port}"
        self._tls = ssl_context is not None

    async def _make_hub(self, job: StreamJob, state_dir: Path, options: dict[str, Any]) -> Hub:
        return Hub(job.spec, job.name, store=StateStore(state_dir), **options)

    def _run(self, coroutine: Any) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(timeout=10)

    def call(self, function: Any, *args: Any) -> Any:
        """Run a plain function on the agent's loop (to read hub state without races)."""

        async def run() -> Any:
            return function(*args)

        return self._run(run())

    def stop(self) -> None:
        self._run(self._runner.cleanup())
        if self._tls:
            # A TLS connection's close handshake finishes on the loop after cleanup; a loop
            # stopped at once leaves its socket transport to the garbage collector, whose
            # ResourceWarning then fails whichever test runs next (seen in CI at setup).
            self._run(asyncio.sleep(0.25))
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()


# (agent url, worker id) -> the secret `register` enrolled it with
SECRETS: dict[tuple[str, int], str] = {}


def _named_worker(url: str, body: Any) -> int | None:
    """The worker id a watch (`pid=`) or an ack body (its first ack's `pid`) names."""
    parts = urllib.parse.urlsplit(url)
    if parts.path == "/v1/control/watch":
        pid = urllib.parse.parse_qs(parts.query).get("pid", [""])[0]
        return int(pid) if pid.isdigit() else None
    if parts.path == "/v1/control/acks" and isinstance(body, list) and body:
        first = body[0]
        pid = first.get("pid") if isinstance(first, dict) else None
        return pid if isinstance(pid, int) else None
    return None


def http(
    url: str,
    method: str = "GET",
    body: Any = None,
    token: str | None = AUTO,
    raw: bytes | None = None,
    *,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any, dict[str, str]]:
    """(status, parsed JSON body or text, headers) of one request; by default with the
    credential of the role that calls the route (`token_for`) and, when it names a worker
    `register` enrolled, that worker's secret (unless `headers` names one)."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(url, data=data, method=method)
    if token == AUTO:
        token = token_for(urllib.parse.urlsplit(url).path)
        parts = urllib.parse.urlsplit(url)
        worker = _named_worker(url, body)
        secret = SECRETS.get((f"{parts.scheme}://{parts.netloc}", worker or -1))
        if secret is not None and WORKER_SECRET_HEADER not in (headers or {}):
            headers = {**(headers or {}), WORKER_SECRET_HEADER: secret}
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status, payload, headers = response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as error:
        status, payload, headers = error.code, error.read(), dict(error.headers)
    try:
        return status, json.loads(payload), headers
    except ValueError:
        return status, payload.decode(), headers


def enrol(url: str, pid: int) -> tuple[int, str]:
    """Enrol a worker as its control client does: (the id it got, its secret)."""
    status, answer, _ = http(f"{url}/v1/control/workers", "POST", {"pid": pid})
    assert status == 201, answer
    return answer["pid"], answer["secret"]


def register(url: str, pid: int, operators: str = "") -> str:
    """Make `pid` a registered worker, as its control client's first calls do (enrol, then
    watch); its secret, which `http` then sends for it. The id must be free."""
    worker, secret = enrol(url, pid)
    assert worker == pid, f"worker id {pid} is taken"
    SECRETS[url, pid] = secret
    status, _, _ = http(f"{url}/v1/control/watch?pid={pid}&operators={operators}&timeout=0")
    assert status in (200, 304)
    return secret


def swap_model_body(name: str = "swap-model", scheduler: str = "fries") -> dict[str, Any]:
    return {
        "name": name,
        "spec": {
            "jobRef": {"name": "fraud-detection"},
            "scheduler": scheduler,
            "functionUpdates": [
                {
                    "operator": "customer-detector",
                    "function": "swivel.jobs.examples.fraud:customer_model",
                    "params": {"model": "cheap"},
                },
                {"operator": "combine", "params": {"rule": "both"}},
            ],
        },
    }


@pytest.fixture(scope="session")
def job() -> StreamJob:
    return load_streamjob(JOB_PATH)


@pytest.fixture
def agent(job: StreamJob, tmp_path: Path) -> Iterator[AgentServer]:
    server = AgentServer(job, tmp_path / "state")
    yield server
    server.stop()


@pytest.fixture
def call() -> Any:
    """`call(url, method, body, token)` -> (status, body, headers)."""
    return http


@pytest.fixture
def swap_model() -> Any:
    return swap_model_body


@pytest.fixture
def start_agent(job: StreamJob, tmp_path: Path) -> Iterator[Any]:
    """Start agents on demand (same state dir by default); every one is stopped at the end."""
    started: list[AgentServer] = []

    def start(port: int = 0, **options: Any) -> AgentServer:
        server = AgentServer(job, tmp_path / "state", port, **options)
        started.append(server)
        return server

    yield start
    for server in started:
        if server._thread.is_alive():
            server.stop()


@pytest.fixture
def clients(agent: Any) -> Iterator[Callable[..., ControlClient]]:
    """Start real worker control clients against `agent`; stopped after the test."""
    started: list[ControlClient] = []

    def start(pid: int, *operators: str, **options: Any) -> ControlClient:
        worker = ControlClient(agent.url, WORKER_TOKEN, pid=pid, watch_timeout_s=5, **options)
        for operator in operators:
            worker.register(operator)
        worker.start()
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """`tests.polling.wait_for` with this folder's old defaults, kept for the tests being
    written alongside the hub split; new tests call `wait_for` directly."""
    wait_for(condition, timeout, every=0.005)
