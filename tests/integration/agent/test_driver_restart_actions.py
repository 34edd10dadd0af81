"""Exactly-once driver actions across a driver restart, against a real agent (Spark replaced
by the shared fakes): the agent marks an action done when its outcome arrives and never
hands it out again, so a restarted driver (or runtime) polling from seq 0 carries out only
what is left: nothing after a completed move, the remaining bins of a move cut short, no
old restart."""

from __future__ import annotations

from typing import Any

import pytest

from swivel.jobs.control.driver_channel import AgentDriverChannel
from swivel.jobs.migration.driver import MigrationDriver
from swivel.jobs.runtime.driver import JobRuntime
from tests.fakes_migration import FakeMover, FakeQuery, FakeSpark, placement_loads, round_robin
from tests.polling import wait_for

from .conftest import DRIVER_TOKEN


@pytest.fixture(autouse=True)
def _no_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """No long-poll threads (one would outlive the agent it polls): `follow` below polls
    the way the drivers' followers do, without waiting."""
    monkeypatch.setattr(MigrationDriver, "_follow", lambda self: None)
    monkeypatch.setattr(MigrationDriver, "_measure_loop", lambda self: None)


def follow(driver: MigrationDriver, since: int = 0) -> tuple[list[dict[str, Any]], int]:
    """What the driver's follower does from `since` (a fresh driver: 0): every action the
    agent hands out, carried out. Returns them and the cursor."""
    handed: list[dict[str, Any]] = []
    while actions := driver.agent.actions(since, timeout=0):
        for action in actions:
            since = max(since, int(action["seq"]))
            driver.handle(dict(action))
            handed.append(dict(action))
    return handed, since


def driver_on(agent: Any, mover: FakeMover, query: FakeQuery | None = None) -> MigrationDriver:
    return MigrationDriver(
        FakeSpark(),
        mover.bins,
        lambda: query,
        AgentDriverChannel(agent.url, DRIVER_TOKEN),
        mover=mover,  # type: ignore[arg-type]
    ).start()


def submit_moves(agent: Any, call: Any, bins: list[int], to: str) -> str:
    # The placement the driver reported (round-robin): the agent plans the moves from it.
    status, _, _ = call(agent.url + "/v1/driver/loads", "POST", placement_loads(round_robin()))
    assert status == 202, status
    body = {
        "name": "move",
        "spec": {"jobRef": {"name": "fraud-detection"}, "moves": [{"bins": bins, "to": to}]},
    }
    status, document, _ = call(agent.url + "/v1/plans", "POST", body)
    assert status == 202, document
    return str(document["id"])


def phase(agent: Any, call: Any, plan_id: str, wanted: str, timeout: float = 5.0) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        document = call(agent.url + f"/v1/plans/{plan_id}")[1]
        return dict(document) if document["phase"] == wanted else None

    return wait_for(reached, timeout, f"{plan_id} {wanted}", every=0.02)


def test_a_restarted_driver_does_not_move_completed_bins_again(start_agent: Any, call: Any) -> None:
    agent = start_agent(migrations=True)
    plan = submit_moves(agent, call, [1, 3], "0")
    mover = FakeMover(bins=16, query=FakeQuery())
    first = driver_on(agent, mover, mover.query)
    handed, _ = follow(first)
    assert [a["action"] for a in handed] == ["move-bins"]
    phase(agent, call, plan, "Completed")
    assert mover.moved == [(1, "0"), (3, "0")]
    first.stop()

    # Bins 1 and 3 move on elsewhere; then the driver and the agent restart.
    mover.assignment.update({1: "1", 3: "1"})
    port = agent.port
    agent.stop()
    agent = start_agent(port, migrations=True)
    again = FakeMover(bins=16, query=FakeQuery(), assignment=dict(mover.assignment))
    restarted = driver_on(agent, again, again.query)
    try:
        assert follow(restarted) == ([], 0)  # from seq 0: nothing left to carry out
        assert again.migrated == [] and again.moved == []
    finally:
        restarted.stop()


def test_a_restart_mid_plan_hands_the_remaining_move_once(start_agent: Any, call: Any) -> None:
    agent = start_agent(migrations=True)
    plan = submit_moves(agent, call, [1, 3], "0")  # both on executor 1 (round-robin)
    mover = FakeMover(bins=16, query=FakeQuery(), stop_after=1)  # dies after one bin
    first = driver_on(agent, mover, mover.query)
    follow(first)
    phase(agent, call, plan, "Applying")
    wait_for(
        lambda: (call(agent.url + f"/v1/plans/{plan}")[1].get("migration") or {}).get("binsMoved"),
        5,
        "a bin moved",
        every=0.02,
    )
    assert mover.moved == [(1, "0")]
    first.stop()

    # The new driver starts before the query's first batch: it gets the move once, waits
    # for the query, then carries the plan on from the placement: the step it was cut
    # short in again, where bin 1 is already on its taker: only bin 3 is left.
    query = FakeQuery()
    again = FakeMover(bins=16, assignment=dict(mover.assignment))
    restarted = driver_on(agent, again, query)
    try:
        handed, cursor = follow(restarted)
        assert [(a["action"], a["planId"]) for a in handed] == [("move-bins", plan)]
        assert follow(restarted, cursor) == ([], cursor)  # once
        assert again.moved == []  # no query yet
        restarted.on_batch_completed(0, query.runId, 100.0)  # the first batch attaches it
        document = phase(agent, call, plan, "Completed")
        assert again.moved == [(3, "0")]
        assert document["migration"]["binsMoved"] == 1
        assert follow(restarted) == ([], 0)  # done: a further restart moves nothing
    finally:
        restarted.stop()


class QuickChannel(AgentDriverChannel):
    """The runtime's channel without the long wait: the follower stops once none is left."""

    runtime: Any = None

    def actions(self, since: int, timeout: float = 20.0) -> list[Any]:
        got = super().actions(since, timeout=0)
        if not got:
            self.runtime._stopping.set()
        return got


def follow_restarts(agent: Any, started_with: int) -> int:
    """A fresh JobRuntime's action poller (query started with config `started_with`);
    the restarts it carried out."""
    channel = QuickChannel(agent.url, DRIVER_TOKEN)
    runtime = JobRuntime(job=None, spark=None, checkpoint="", agent=channel)  # type: ignore[arg-type]
    object.__setattr__(channel, "runtime", runtime)
    runtime.started_config_version = started_with
    restarts: list[int] = []
    runtime.restart = lambda baseline=None: restarts.append(1)  # type: ignore[method-assign,assignment,return-value]
    runtime._follow_actions()
    return len(restarts)


def test_a_restarted_runtime_does_not_replay_an_old_restart(
    agent: Any, call: Any, swap_model: Any
) -> None:
    assert call(agent.url + "/v1/plans", "POST", swap_model(scheduler="restart"))[0] == 202
    assert follow_restarts(agent, started_with=1) == 1  # restarts, reports it done
    assert follow_restarts(agent, started_with=2) == 0  # the next process: nothing handed
    assert call(agent.url + "/v1/driver/actions?since=0&timeout=0")[0] == 304


def test_a_restart_for_the_config_the_query_started_with_is_skipped(
    agent: Any, call: Any, swap_model: Any
) -> None:
    assert call(agent.url + "/v1/plans", "POST", swap_model(scheduler="restart"))[0] == 202
    # The runtime died before restarting; the new one started with configuration 2 already.
    assert follow_restarts(agent, started_with=2) == 0
    assert call(agent.url + "/v1/driver/actions?since=0&timeout=0")[0] == 304  # marked done
    status, answer, _ = call(agent.url + "/v1/driver/actions/done", "POST", {"seq": "x"})
    assert status == 400, answer
