"""TLS between the agent and its callers: the operator's per-job certificate, served by a real
aiohttp agent; the operator's link, the driver's channel and a worker's control client verify
it against the job's CA, and a certificate of another job's CA is refused."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from swivel.api.streamjob import StreamJob
from swivel.jobs.agent.auth import tls_context
from swivel.jobs.agent.client import AgentClient, AgentUnreachable
from swivel.jobs.control import client as control
from swivel.jobs.control.client import ControlClient
from swivel.jobs.control.connection import Connection
from swivel.jobs.control.driver_channel import AgentDriverChannel
from swivel.operator.agents import ClientAgentLink, JobAddress
from swivel.operator.credentials import agent_hosts, new_credentials

from .conftest import DRIVER_TOKEN, TOKEN, WORKER_TOKEN, AgentServer

HOSTS = agent_hosts("fraud-detection-driver", "streams")


@pytest.fixture(scope="module")
def credentials() -> Any:
    return new_credentials(HOSTS, token=lambda: TOKEN)


@pytest.fixture
def tls_agent(job: StreamJob, tmp_path: Path, credentials: Any) -> Iterator[AgentServer]:
    (tmp_path / "tls.crt").write_text(credentials.cert_pem)
    (tmp_path / "tls.key").write_text(credentials.key_pem)
    environ = {
        "SWIVEL_AGENT_TLS_CERT": str(tmp_path / "tls.crt"),
        "SWIVEL_AGENT_TLS_KEY": str(tmp_path / "tls.key"),
    }
    server = AgentServer(job, tmp_path / "state", ssl_context=tls_context(environ))
    yield server
    server.stop()


def test_the_operator_link_verifies_the_agent_against_the_job_ca(
    tls_agent: AgentServer, credentials: Any, swap_model: Any
) -> None:
    link = ClientAgentLink(lambda _ns, _job: tls_agent.url.replace("https", "http"), retries=0)
    address = JobAddress("streams", "fraud-detection", TOKEN, credentials.ca_pem)

    async def scenario() -> tuple[dict[str, Any], Any]:
        try:
            body = swap_model()
            plan = await link.submit(address, body["name"], body["spec"])
            health = await link.health(address)
            return plan, health
        finally:
            await link.close()

    plan, health = asyncio.run(scenario())
    assert plan["phase"] == "Applying" and health.config_version == 2


def test_another_jobs_ca_is_refused(tls_agent: AgentServer) -> None:
    stranger = new_credentials(HOSTS)
    context = ssl.create_default_context(cadata=stranger.ca_pem)

    async def scenario() -> None:
        async with AgentClient(tls_agent.url, TOKEN, retries=0, ssl_context=context) as client:
            await client.get_config()

    with pytest.raises(AgentUnreachable, match="certificate"):
        asyncio.run(scenario())
    with pytest.raises(OSError, match="certificate"):  # nor does a worker trust it
        Connection(tls_agent.url, WORKER_TOKEN, stranger.ca_pem).request(
            "GET", "/v1/control/watch?timeout=0", 5
        )


def test_the_driver_and_a_worker_speak_https_with_the_job_ca(
    tls_agent: AgentServer, credentials: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(control.ENV_CA, credentials.ca_pem)
    channel = AgentDriverChannel(tls_agent.url, DRIVER_TOKEN)
    channel.report({"batchId": 3, "event": "started"})
    assert tls_agent.call(lambda: tls_agent.hub.ready)
    worker = ControlClient(tls_agent.url, WORKER_TOKEN, pid=501, watch_timeout_s=1)
    worker.register("combine")
    try:
        worker.start()
        assert worker.wait_for_revision(1, 5) is not None
    finally:
        worker.stop()
    assert 501 in tls_agent.call(lambda: set(tls_agent.hub.workers))
