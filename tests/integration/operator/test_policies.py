"""Policies for real: the operator (the real kopf runtime on the sandbox) reads a real
agent's `GET /v1/loads` through `ClientAgentLink` and creates automatic Reconfigurations.

The agent (hub + aiohttp on 127.0.0.1, with the job's token from its Secret) is fed loads
through its driver route, as `MigrationDriver` feeds it; the test plays the driver.
Without loads nothing is created and an Event says why.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import ssl
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from kubernetes import client

from swivel.api.manifests import load_streamjob
from swivel.jobs.agent.app import create_app
from swivel.jobs.agent.auth import tls_context
from swivel.jobs.agent.hub import Hub
from swivel.jobs.agent.store import StateStore
from swivel.operator.agents import ClientAgentLink
from swivel.operator.clusters import KubernetesCluster
from swivel.operator.contexts import Intervals, OperatorContext
from swivel.operator.credentials import JobCredentials
from swivel_tools.sandbox import SandboxThread
from tests.fakes_agent import TestingAgentLink
from tests.polling import wait_for

from .conftest import ROOT, Harness, OperatorThread

JOB = "fraud-detection"


class Agent:
    """A real agent on its own loop thread (the job's sidecar, minus the pod): it serves
    HTTPS with the certificate of the job's Secret, as the sidecar does; `call` uses the
    credential of the role that calls the route (the driver's for /v1/driver/*)."""

    def __init__(self, credentials: JobCredentials, state_dir: Path) -> None:
        job = load_streamjob(ROOT / "examples" / "fraud-detection" / "streamjob.yaml")
        self.credentials = credentials
        state_dir.mkdir(parents=True, exist_ok=True)
        assert credentials.cert_pem and credentials.key_pem and credentials.ca_pem
        (state_dir / "tls.crt").write_text(credentials.cert_pem)
        (state_dir / "tls.key").write_text(credentials.key_pem)
        tls = tls_context(
            {
                "SWIVEL_AGENT_TLS_CERT": str(state_dir / "tls.crt"),
                "SWIVEL_AGENT_TLS_KEY": str(state_dir / "tls.key"),
            }
        )
        self._client_tls = ssl.create_default_context(cadata=credentials.ca_pem)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

        async def make() -> Hub:
            return Hub(job.spec, job.name, store=StateStore(state_dir), migrations=True)

        self.hub: Hub = self._run(make())
        self._runner = web.AppRunner(create_app(self.hub, credentials.token), access_log=None)
        self._run(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=tls)
        self._run(site.start())
        assert site._server is not None and site._server.sockets
        self.url = f"https://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"

    def _run(self, coroutine: Any) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(timeout=10)

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        import urllib.error
        import urllib.request

        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        driver = path.startswith("/v1/driver/")
        token = self.credentials.driver_token if driver else self.credentials.token
        request.add_header("Authorization", f"Bearer {token}")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10, context=self._client_tls) as response:
                status, payload = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, payload = error.code, error.read()
        return status, (json.loads(payload) if payload else None)

    def stop(self) -> None:
        self._run(self._runner.cleanup())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()


def skewed_loads(*, interval: float = 30.0, coordination: float = 0.2) -> dict[str, Any]:
    """Executor 0 busy 90 %, executor 1 10 %; bin 6 (on 0) is the hot one."""
    bins = [
        {
            "bin": b,
            "executor": str(b % 2),
            "records": 4000 if b == 6 else (1000 if b % 2 == 0 else 100),
            "stateBytes": 1000,
        }
        for b in range(16)
    ]
    return {
        "measuredAt": 1_800_000_000.0,
        "batches": [10, 11, 12, 13, 14],
        "windowSeconds": 10.0,
        "executors": [
            {"executor": "0", "busySeconds": 9.0, "windowSeconds": 10.0, "memoryBytes": 8000},
            {"executor": "1", "busySeconds": 1.0, "windowSeconds": 10.0, "memoryBytes": 8000},
        ],
        "bins": bins,
        "coordinationSeconds": coordination,
        "processingSeconds": 10.0,
        "coordinationIntervalSeconds": interval,
    }


@pytest.fixture
def setup(
    sandbox: tuple[SandboxThread, client.ApiClient], tmp_path: Path
) -> Iterator[tuple[Harness, Any]]:
    """A namespace, an operator whose agent link is the real `ClientAgentLink`, and a
    function that starts the job's agent with the token from the job's Secret."""
    running, api = sandbox
    namespace = f"pol-{secrets.token_hex(3)}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
    harness = Harness(api=api, namespace=namespace, server=running.url, link=TestingAgentLink())
    agents: list[Agent] = []

    def url_for(namespace: str, job: str) -> str:
        return agents[0].url if agents else "https://127.0.0.1:9"  # nothing listens on 9

    ctx = OperatorContext(
        cluster=KubernetesCluster(api),
        agents=ClientAgentLink(url_for, retries=0, request_timeout_s=2.0),
        intervals=Intervals(health=0.5, reconfiguration=0.2, policies=0.2),
    )
    harness.operator = OperatorThread(ctx, namespace, running.url)

    def start_agent() -> Agent:
        secret = wait_for(
            lambda: _secret(harness, f"{JOB}-agent-token"), 10, "the agent token Secret"
        )
        credentials = JobCredentials.of_secret({"data": secret.data})
        assert credentials is not None and credentials.tls  # the operator issued its certificate
        agents.append(Agent(credentials, tmp_path / "agent"))
        return agents[0]

    try:
        yield harness, start_agent
    finally:
        harness.stop()
        for agent in agents:
            agent.stop()


def _secret(harness: Harness, name: str) -> Any:
    try:
        return harness.core.read_namespaced_secret(name, harness.namespace)
    except client.ApiException:
        return None


def _job(harness: Harness, policies: dict[str, Any]) -> None:
    body = harness.example("streamjob.yaml")
    body["metadata"] = {"name": JOB}
    body["spec"]["policies"] = policies
    harness.create("streamjobs", body)


def _automatic(harness: Harness, policy: str) -> list[dict[str, Any]]:
    listed = harness.custom.list_namespaced_custom_object(
        "swivel.dev", "v1alpha1", harness.namespace, "reconfigurations",
        label_selector=f"swivel.dev/automatic=true,swivel.dev/policy={policy}",
    )  # fmt: skip
    return list(listed["items"])


def _events(harness: Harness, reason: str) -> list[Any]:
    items = harness.core.list_namespaced_event(harness.namespace).items
    return [e for e in items if e.reason == reason and e.involved_object.name == JOB]


def test_a_skewed_load_becomes_an_automatic_rebalance(setup: tuple[Harness, Any]) -> None:
    harness, start_agent = setup
    _job(harness, {"rebalance": {"enabled": True, "intervalSeconds": 5}})
    harness.run_driver(JOB)
    agent = start_agent()
    # No measurement yet: nothing is created, and the job says why (once).
    wait_for(lambda: _events(harness, "PolicyNoLoads"), 30, "a PolicyNoLoads Event")
    assert _automatic(harness, "rebalance") == []
    assert len(_events(harness, "PolicyNoLoads")) == 1

    assert agent.call("POST", "/v1/driver/loads", skewed_loads())[0] == 202
    created = wait_for(lambda: _automatic(harness, "rebalance"), 30, "a rebalance")
    assert len(created) == 1
    recon = created[0]
    assert recon["spec"]["moves"] == [{"bins": [6], "to": "1"}]  # the hot bin, to the idle one
    assert recon["metadata"]["labels"]["swivel.dev/job"] == JOB
    assert recon["metadata"]["ownerReferences"][0]["name"] == JOB
    inputs = json.loads(recon["metadata"]["annotations"]["swivel.dev/policy-inputs"])
    assert inputs["executors"] == {
        "0": {"utilisation": 0.9, "memoryBytes": 8000},
        "1": {"utilisation": 0.1, "memoryBytes": 8000},
    }
    assert inputs["moves"] == [
        {"bin": 6, "from": "0", "to": "1", "records": 4000, "stateBytes": 1000}
    ]
    assert inputs["batches"] == [10, 11, 12, 13, 14]
    # The operator carries it out like any Reconfiguration: the agent accepted the moves and
    # queued them for the driver, and forgot the loads measured on the old placement.
    name = recon["metadata"]["name"]
    harness.wait_phase("reconfigurations", name, "Applying", timeout=30)
    status, action = agent.call("GET", "/v1/driver/actions?since=0&timeout=0")
    assert status == 200 and action["action"] == "move-bins"
    assert action["moves"] == [{"bins": [6], "to": "1"}]
    assert agent.call("GET", "/v1/loads")[0] == 404
    wait_for(lambda: _events(harness, "PolicyReconfiguration"), 10, "PolicyReconfiguration")


def test_aimd_changes_the_coordination_interval_through_a_reconfiguration(
    setup: tuple[Harness, Any],
) -> None:
    harness, start_agent = setup
    _job(harness, {"aimd": {"enabled": True, "minIntervalMs": 500, "maxIntervalMs": 60_000}})
    harness.run_driver(JOB)
    agent = start_agent()
    # Damped: overhead 1 % is below the band, AIMD shrinks 4 s by 0.5 s -- 12.5 %, under the
    # 20 % threshold, so nothing is proposed (and the job says so).
    calm = skewed_loads(interval=4.0, coordination=0.01)
    calm["processingSeconds"] = 0.99
    assert agent.call("POST", "/v1/driver/loads", calm)[0] == 202
    wait_for(lambda: _events(harness, "AimdHold"), 30, "an AimdHold Event")
    assert _automatic(harness, "aimd") == []
    # Overhead 50 % (smoothed 0.3 * 0.5 + 0.7 * 0.01 = 15.7 %) is above the band: double.
    busy = skewed_loads(interval=4.0, coordination=1.0)
    busy["processingSeconds"] = 1.0
    busy["measuredAt"] = 1_800_000_100.0
    assert agent.call("POST", "/v1/driver/loads", busy)[0] == 202
    created = wait_for(lambda: _automatic(harness, "aimd"), 30, "an aimd Reconfiguration")
    recon = created[0]
    assert recon["spec"]["coordination"] == {"intervalSeconds": 8.0}
    assert recon["spec"]["moves"] == []
    inputs = json.loads(recon["metadata"]["annotations"]["swivel.dev/policy-inputs"])
    assert inputs["overhead"] == 0.5 and inputs["fromIntervalSeconds"] == 4.0
    assert inputs["smoothedOverhead"] == pytest.approx(0.157)
    name = recon["metadata"]["name"]
    harness.wait_phase("reconfigurations", name, "Applying", timeout=30)
    # Play the driver: take the action, apply it, confirm; the Reconfiguration completes.
    _, action = agent.call("GET", "/v1/driver/actions?since=0&timeout=0")
    assert action["action"] == "set-coordination" and action["intervalSeconds"] == 8.0
    confirm = {"planId": action["planId"], "intervalSeconds": 8.0}
    assert agent.call("POST", "/v1/driver/coordination", confirm)[0] == 202
    harness.wait_phase("reconfigurations", name, "Completed", timeout=30)
    assert len(_automatic(harness, "aimd")) == 1  # one step per measurement, not per tick
