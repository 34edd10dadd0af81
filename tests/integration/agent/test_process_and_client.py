"""`swivel agent` as a real process, driven by the CLI/operator's AgentClient."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from swivel.jobs.agent.auth import Role, role_token
from swivel.jobs.agent.client import AgentClient, AgentRejected, AgentUnreachable
from swivel.jobs.control.identity import WORKER_SECRET_HEADER
from tests.polling import wait_for

ROOT = Path(__file__).resolve().parents[3]
TOKEN = "process-token"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def agent_process(tmp_path: Path) -> Iterator[str]:
    port = _free_port()
    secret = tmp_path / "token"
    secret.write_text(TOKEN + "\n")
    env = {k: v for k, v in os.environ.items() if k != "SWIVEL_AGENT_TOKEN"}
    env["SWIVEL_AGENT_TOKEN_FILE"] = str(secret)
    command = [
        sys.executable, "-m", "swivel", "agent",
        "--job", str(ROOT / "examples/fraud-detection/streamjob.yaml"),
        "--port", str(port), "--state-dir", str(tmp_path / "state"),
    ]  # fmt: skip
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:

        def started() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    return True
            except OSError:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                raise

        wait_for(started, 20, "the agent to start", ignoring=(OSError,))
        yield url
    finally:
        process.terminate()
        process.wait(10)
        if process.stderr is not None:
            process.stderr.close()


def test_the_cli_agent_serves_plans_to_the_client(agent_process: str, call: Any) -> None:
    assert call(agent_process + "/healthz", token=None)[0] == 200
    assert call(agent_process + "/v1/config", token=None)[0] == 401
    assert call(agent_process + "/v1/config", token="nope")[0] == 401

    async def scenario() -> tuple[dict[str, Any], AgentRejected, dict[str, Any]]:
        async with AgentClient(agent_process, TOKEN) as client:
            spec = {
                "jobRef": {"name": "fraud-detection"},
                "functionUpdates": [{"operator": "combine", "params": {"rule": "both"}}],
            }
            plan = await client.submit_plan("combine-both", spec)
            try:
                await client.submit_plan(
                    "ghost", {**spec, "functionUpdates": [{"operator": "ghost"}]}
                )
            except AgentRejected as error:
                rejected = error
            worker = role_token(TOKEN, Role.WORKER)  # what the agent derives for workers
            status, _, _ = call(agent_process + "/v1/control/acks", "POST", [], token=TOKEN)
            assert status == 403  # the operator's credential does not ack
            enrolled = call(agent_process + "/v1/control/workers", "POST", {"pid": 1}, worker)
            assert enrolled[0] == 201 and enrolled[1]["pid"] == 1
            own = {WORKER_SECRET_HEADER: enrolled[1]["secret"]}  # this worker's own secret
            call(agent_process + "/v1/control/watch?pid=1&timeout=0", token=worker, headers=own)
            ack = [{"pid": 1, "operator": "combine", "version": 2, "configVersion": 2}]
            url = agent_process + "/v1/control/acks"
            status, _, _ = call(url, "POST", ack, token=worker, headers=own)
            assert status == 202
            done = await client.wait_for_completion(plan["id"], timeout_s=10)
            config = await client.get_config()
            assert config["operators"]["combine"]["version"] == 2
            return plan, rejected, done

    plan, rejected, done = asyncio.run(scenario())
    assert plan["phase"] == "Applying"
    assert rejected.status == 422
    assert rejected.errors[0]["field"] == "spec.functionUpdates[0].operator"
    assert done["phase"] == "Completed" and done["delayMs"] is not None


def test_the_client_retries_then_reports_an_unreachable_agent() -> None:
    async def scenario() -> None:
        async with AgentClient(
            f"http://127.0.0.1:{_free_port()}", TOKEN, retries=2, backoff_s=0.01
        ) as client:
            await client.get_config()

    started = time.monotonic()
    with pytest.raises(AgentUnreachable):
        asyncio.run(scenario())
    assert time.monotonic() - started < 5
