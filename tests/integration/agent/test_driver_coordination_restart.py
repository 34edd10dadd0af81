"""A restarted driver keeps the coordination interval AIMD chose: the agent serves the
interval of the last coordination the driver confirmed (`coordinationIntervalSeconds` of
GET /v1/config, durable across an agent restart) and `start_migration_driver` starts with it.
Spark is replaced by fakes; the agent is real."""

from __future__ import annotations

from typing import Any

import pytest

from swivel.jobs.control.driver_channel import AgentDriverChannel
from swivel.jobs.migration.driver import DEFAULT_COORDINATION_INTERVAL_S, MigrationDriver
from swivel.jobs.migration.starting import agent_coordination_interval, start_migration_driver
from tests.fakes_migration import FakeMover, FakeSpark

from .conftest import DRIVER_TOKEN


@pytest.fixture(autouse=True)
def _no_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The drivers' long-poll and measuring threads stay off (a long-poll would outlive the
    agent it polls); the test hands actions to `handle` itself."""
    monkeypatch.setattr(MigrationDriver, "_follow", lambda self: None)
    monkeypatch.setattr(MigrationDriver, "_measure_loop", lambda self: None)


def _replay(driver: Any, agent: Any, call: Any) -> list[dict[str, Any]]:
    """What a driver's action follower does from seq 0: every action the agent kept."""
    actions, seq = [], 0
    while (answer := call(agent.url + f"/v1/driver/actions?since={seq}&timeout=0"))[0] == 200:
        action = answer[1]
        seq = int(action["seq"])
        driver.handle(action)
        actions.append(action)
    return actions


def _start(agent: Any, **options: Any) -> Any:
    return start_migration_driver(
        FakeSpark(), 16, lambda: None, agent.url, DRIVER_TOKEN, mover=FakeMover(), **options
    )


def _coordinate(agent: Any, call: Any, name: str, interval: float) -> str:
    body = {
        "name": name,
        "spec": {
            "jobRef": {"name": "fraud-detection"},
            "coordination": {"intervalSeconds": interval},
        },
    }
    status, document, _ = call(agent.url + "/v1/plans", "POST", body)
    assert status == 202, document
    return str(document["id"])


def test_a_restarted_driver_takes_the_interval_up_from_the_agent(
    start_agent: Any, call: Any
) -> None:
    agent = start_agent(migrations=True)
    assert call(agent.url + "/v1/config")[1]["coordinationIntervalSeconds"] is None
    fresh = _start(agent)  # nothing confirmed yet: the default
    assert fresh.coordination_interval_s == DEFAULT_COORDINATION_INTERVAL_S
    fresh.stop()

    # AIMD's plans reach the driver; it confirms each (the second one is the current one).
    driver = _start(agent)
    confirmed = []
    for name, interval in (("aimd-1", 30.0), ("aimd-2", 12.5)):
        plan_id = _coordinate(agent, call, name, interval)
        confirmed.append(plan_id)
        driver.handle({"action": "set-coordination", "planId": plan_id,
                       "intervalSeconds": interval})  # fmt: skip
        assert call(agent.url + f"/v1/plans/{plan_id}")[1]["phase"] == "Completed"
    driver.stop()
    assert call(agent.url + "/v1/config")[1]["coordinationIntervalSeconds"] == 12.5

    # The agent restarts too (same state dir, same port): the interval is durable.
    port = agent.port
    agent.stop()
    agent = start_agent(port, migrations=True)
    assert agent_coordination_interval(AgentDriverChannel(agent.url, DRIVER_TOKEN)) == 12.5
    restarted = _start(agent)
    try:
        assert restarted.coordination_interval_s == 12.5  # not the 60 s default
        # A restarted follower starts at seq 0 and does not go back to 30 s: the agent
        # marked both set-coordination actions done when the driver confirmed them.
        seen: list[float] = []
        original = restarted.set_coordination_interval
        restarted.set_coordination_interval = lambda i, **k: (seen.append(i), original(i, **k))
        replayed = _replay(restarted, agent, call)
        assert replayed == [] and seen == []
        # An action the agent still hands out for a plan confirmed meanwhile (an older
        # agent, or a confirmation racing the poll) is skipped by the driver as well.
        restarted.handle({"action": "set-coordination", "planId": confirmed[0],
                          "intervalSeconds": 30.0})  # fmt: skip
        assert seen == []
        assert restarted.coordination_interval_s == 12.5
    finally:
        restarted.stop()

    explicit = _start(agent, coordination_interval_s=5.0)  # an explicit interval wins
    assert explicit.coordination_interval_s == 5.0
    explicit.stop()


def test_no_agent_answer_means_the_default(start_agent: Any) -> None:
    agent = start_agent(migrations=True)
    agent.stop()  # nobody listens on its port now
    assert agent_coordination_interval(AgentDriverChannel(agent.url, DRIVER_TOKEN)) is None
