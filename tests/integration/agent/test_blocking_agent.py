"""Embedded mode's calls to the agent go through the CLI's one client (`AgentClient`, behind
`swivel.embedded.agents.BlockingAgent`): health, submissions (a naive override, a 409 with
the plan in flight) and following a plan to its end, against a real agent."""

from __future__ import annotations

import time
from typing import Any

import pytest

from swivel.embedded.agents import BlockingAgent
from swivel.jobs.agent.client import AgentRejected, AgentUnreachable

from .conftest import TOKEN, register, swap_model_body


def test_embedded_mode_submits_and_follows_a_plan_through_agent_client(
    start_agent: Any, call: Any
) -> None:
    agent = start_agent()
    blocking = BlockingAgent(agent.url, TOKEN)
    assert blocking.health() == {"status": "ok"}
    spec = swap_model_body()["spec"]
    requested = time.time() - 0.5
    plan = blocking.submit("swap-model", spec, requested_at=requested)
    assert (plan["phase"], plan["scheduler"]) == ("Applying", "fries")
    with pytest.raises(AgentRejected) as busy:
        blocking.submit("another", spec)
    assert (busy.value.status, busy.value.running_plan) == (409, plan["id"])
    register(agent.url, 7)
    acks = [
        {"pid": 7, "operator": op, "version": 2, "configVersion": 2}
        for op in ("customer-detector", "combine")
    ]
    assert call(agent.url + "/v1/control/acks", "POST", acks)[0] == 202
    done = blocking.wait_for_completion(plan["id"], timeout_s=30)
    assert done["phase"] == "Completed" and done["delayMs"] >= 500  # from `requested_at`
    naive = blocking.submit(
        "naive-swap", {**spec, "scheduler": "fries"}, scheduler_override="naive"
    )
    assert naive["scheduler"] == "naive"


def test_an_agent_that_is_not_there_is_unreachable_not_a_hang() -> None:
    blocking = BlockingAgent("http://127.0.0.1:9", TOKEN, retries=0, request_timeout_s=0.5)
    with pytest.raises(AgentUnreachable):
        blocking.health()
