"""The driver's one client to its agent (`jobs/control/driver_channel.py`) against a real
agent on 127.0.0.1: its answers decoded, an error status raised as `AgentCallError` (an
OSError, which every caller that tolerates an unreachable agent catches), a finished
long-poll with nothing new read as no actions."""

from __future__ import annotations

from typing import Any

import pytest

from swivel.jobs.control.driver_channel import AgentCallError, AgentDriverChannel

from .conftest import DRIVER_TOKEN, TOKEN


def test_answers_are_decoded_and_errors_carry_their_status(agent: Any) -> None:
    channel = AgentDriverChannel(agent.url, DRIVER_TOKEN)
    config = channel.config()
    assert config["activePlan"] is None and config["coordinationIntervalSeconds"] is None
    with pytest.raises(AgentCallError) as refused:
        channel.report({"batchId": "not a batch id", "event": "completed"})
    assert refused.value.status == 400 and isinstance(refused.value, OSError)
    with pytest.raises(AgentCallError) as unknown:
        channel.plan("no-such-plan")
    assert unknown.value.status == 404


def test_the_operators_token_is_not_the_drivers(agent: Any) -> None:
    """A channel with another role's credential is refused on the driver's routes (403),
    with no credential at all it is unauthenticated (401): never a success."""
    with pytest.raises(AgentCallError) as wrong_role:
        AgentDriverChannel(agent.url, TOKEN).report({"batchId": 1, "event": "completed"})
    assert wrong_role.value.status == 403
    with pytest.raises(AgentCallError) as anonymous:
        AgentDriverChannel(agent.url, None).report({"batchId": 1, "event": "completed"})
    assert anonymous.value.status == 401


def test_a_long_poll_with_nothing_new_is_no_actions(agent: Any) -> None:
    assert AgentDriverChannel(agent.url, DRIVER_TOKEN).actions(0, timeout=0.2) == []
