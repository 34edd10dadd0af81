"""`ClientAgentLink.submit` sends the Reconfiguration's idempotency key, and the agent
answers a repeat with the plan the first submission created (issue 5: no double apply)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiohttp import web

from swivel.api.manifests import load_streamjob
from swivel.jobs.agent.app import create_app
from swivel.jobs.agent.hub import Hub
from swivel.jobs.agent.store import StateStore
from swivel.operator.agents import ClientAgentLink, JobAddress
from swivel.operator.reconfiguration_steps import idempotency_key

ROOT = Path(__file__).resolve().parents[3]
TOKEN = "unit-token"
SPEC = {
    "jobRef": {"name": "fraud-detection"},
    "functionUpdates": [{"operator": "combine", "params": {"rule": "both"}}],
}


def test_the_key_is_namespace_name_uid() -> None:
    obj = {"metadata": {"namespace": "streams", "name": "swap-model", "uid": "0b9f"}}
    assert idempotency_key(obj) == "streams/swap-model/0b9f"


async def _submissions(state: Path) -> tuple[list[dict[str, Any]], list[Any]]:
    job = load_streamjob(ROOT / "examples" / "fraud-detection" / "streamjob.yaml")
    hub = Hub(job.spec, job.name, store=StateStore(state))
    seen: list[Any] = []

    @web.middleware
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.method == "POST" and request.path == "/v1/plans":
            seen.append(await request.json())
        response: web.StreamResponse = await handler(request)
        return response

    app = create_app(hub, TOKEN)
    app.middlewares.append(record)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    assert site._server is not None and site._server.sockets
    port = site._server.sockets[0].getsockname()[1]
    link = ClientAgentLink(lambda namespace, job: f"http://127.0.0.1:{port}", retries=0)
    address = JobAddress("streams", "fraud-detection", TOKEN)
    try:
        key = "streams/swap-model/0b9f"
        documents = [
            await link.submit(address, "swap-model", SPEC, key=key),
            await link.submit(address, "swap-model", SPEC, key=key),  # the crash window
        ]
    finally:
        await link.close()
        await runner.cleanup()
    return documents, seen


def test_a_resubmission_with_the_same_key_gets_the_same_plan(tmp_path: Path) -> None:
    (first, again), seen = asyncio.run(_submissions(tmp_path / "state"))
    assert [body["idempotencyKey"] for body in seen] == ["streams/swap-model/0b9f"] * 2
    assert again["id"] == first["id"]  # not 409 busy, not a second plan
    assert again["configVersion"] == first["configVersion"] == 2


async def _long_polls(state: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    job = load_streamjob(ROOT / "examples" / "fraud-detection" / "streamjob.yaml")
    hub = Hub(job.spec, job.name, store=StateStore(state))
    runner = web.AppRunner(create_app(hub, TOKEN), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    assert site._server is not None and site._server.sockets
    port = site._server.sockets[0].getsockname()[1]
    # A request timeout shorter than the wait: the long-poll must not be cut off by it.
    link = ClientAgentLink(
        lambda namespace, job: f"http://127.0.0.1:{port}", retries=0, request_timeout_s=0.3
    )
    address = JobAddress("streams", "fraud-detection", TOKEN)
    try:
        first = await link.submit(address, "swap-model", SPEC)
        same = await link.get_plan(address, first["id"], since=first["revision"], timeout=0.6)

        async def ack_soon() -> None:
            await asyncio.sleep(0.1)
            hub.registry.register(7, ())  # as its first watch would
            hub.record_acks([{"pid": 7, "operator": "combine", "version": 2, "configVersion": 2}])

        acking = asyncio.create_task(ack_soon())
        changed = await link.get_plan(address, first["id"], since=first["revision"], timeout=5)
        await acking
    finally:
        await link.close()
        await runner.cleanup()
    return first, same, changed


def test_get_plan_long_polls_past_the_request_timeout(tmp_path: Path) -> None:
    first, same, changed = asyncio.run(_long_polls(tmp_path / "state"))
    assert same == first  # unchanged after the wait, not AgentUnreachable
    assert changed["phase"] == "Completed" and changed["revision"] != first["revision"]
